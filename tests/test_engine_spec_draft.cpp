// Speculative decoding with a draft model (engine/spec/draft_model.h,
// --draft-model): seeded sampling unchanged and reproducible with a draft,
// the draft's proposal always its greedy continuation after rollbacks and
// catch-ups, a full draft pool evicting idle sequences, draft KV freed when
// sequences end, and a draft of another vocabulary refused (by the engine
// and by `nexus serve`). The greedy-equality cases of every proposer,
// draft models included, are test_engine_spec.cpp's SpecOnModel.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/spec/draft_model.h"
#include "gguf/gguf_file.h"
#include "kernels/thread_pool.h"
#include "model/kv_cache.h"
#include "model/llama_model.h"
#include "support/gguf_writer.h"
#include "support/loaded_model.h"
#include "support/spec_engine.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

using namespace nexus;

namespace {

using namespace nexus::test::spec_engine;

// The same with a draft model (half the requests with a prediction, which
// goes first), twice: every seed draws what it draws without speculation,
// and again on a second engine (reproducible). The model as its own draft
// proposes its argmax, which sampling at temperature 0.7-1 often rejects;
// a random-weight draft is rejected nearly always.
TEST(EngineSpecDraft, SeededSamplingIsUnchangedAndReproducible) {
  LOAD_STORIES(m);
  const std::vector<GenerationRequest> reqs = seeded_requests(m, 2);
  const auto want = tokens_of(reference(m, reqs));
  for (const char* draft : {"stories260K.gguf", "arch/llama-d256-F32.gguf"}) {
    NEXUS_REQUIRE_SHARED(draft_path, draft);
    EngineOptions o = opts(SpecProposer::Ngram);  // after the draft model: used only when it has nothing
    o.spec.draft_model = &nexus::test::loaded_model(draft_path).model;
    for (int round = 0; round < 2; ++round) {
      Engine e(m.model, *m.tok, o);
      const std::vector<Outcome> got = run_all(e, reqs);
      EXPECT_EQ(tokens_of(got), want) << draft << " round " << round;
      expect_usage_matches(reqs, got);
      const EngineStats s = idle_stats(e);
      EXPECT_GT(s.spec_proposed_draft, 0) << draft;
      EXPECT_LT(s.spec_accepted_draft, s.spec_proposed_draft) << draft << ": sampling rejects some";
      if (std::string(draft) == "stories260K.gguf") {
        EXPECT_GT(s.spec_accepted_draft, 0) << draft;
      }
      expect_no_kv_held(s, draft);
    }
  }
}

// A new DraftModel has timed itself (a pass of one sequence and one of
// max_seqs, after an untimed pass that pages its weights in): what a
// proposed token costs is known before the first request, and the warm-up
// leaves nothing in its pool, cached blocks included.
TEST(EngineSpecDraft, ConstructionMeasuresTheDraftsCostAndLeavesThePoolEmpty) {
  LOAD_STORIES(m);
  ThreadPool pool(2);
  spec::DraftModel d(m.model, pool, KvType::F16, 4, 128, 64);
  for (int32_t n_seqs : {1, 4}) EXPECT_TRUE(d.pass_cost().measured(n_seqs)) << n_seqs;
  // The first sequence proposing pays a whole pass; each one joining it,
  // what it adds to the pass.
  const spec::ProposerCost alone = d.token_cost(0);
  EXPECT_TRUE(alone.known);
  EXPECT_EQ(alone.token_s, d.pass_cost().seconds(1));
  EXPECT_GT(alone.token_s, 0);
  EXPECT_EQ(d.token_cost(3).token_s, std::max(0.0, d.pass_cost().seconds(4) - d.pass_cost().seconds(3)));
  EXPECT_GE(alone.catch_up_s, 0);
  EXPECT_EQ(alone.setup_s, 0);  // the caller's to set
  d.blocks().validate();
  EXPECT_EQ(d.blocks().n_used(), 0);
  EXPECT_EQ(d.blocks().n_cached(), 0);
  EXPECT_EQ(d.blocks().n_sequences(), 0);
}

// A fresh DraftModel's proposal of k tokens after `tokens` (no KV kept).
std::vector<int32_t> fresh_proposal(const Loaded& m, ThreadPool& pool, std::span<const int32_t> tokens, int32_t k) {
  spec::DraftModel d(m.model, pool, KvType::F16, 1, 128, 512);
  std::vector<int32_t> out;
  std::vector<spec::DraftModel::Request> r{{1, tokens, k, &out}};
  d.propose(r);
  return out;
}

// The draft model alone: its proposal for any token history is the
// greedy continuation of that history, whatever it proposed before -- after
// rejections (the history diverges from what it proposed: its KV is cut
// back), after a catch-up in chunks, and next to other sequences in the
// same batched passes. A fresh DraftModel (no KV) is the reference, and its
// proposal for the prompt is the engine's plain greedy output.
TEST(EngineSpecDraft, ProposalIsTheGreedyContinuationAfterRollbacks) {
  LOAD_STORIES(m);
  const std::vector<GenerationRequest> base = base_requests(*m.tok);
  const auto greedy_ref = tokens_of(reference(m, base));
  ThreadPool pool(2);
  constexpr int32_t kK = 4;
  auto fresh = [&](std::span<const int32_t> tokens) { return fresh_proposal(m, pool, tokens, kK); };
  for (size_t i = 0; i < base.size(); ++i) {
    const std::vector<int32_t> first(greedy_ref[i].begin(), greedy_ref[i].begin() + kK);
    EXPECT_EQ(fresh(base[i].prompt), first) << "request " << i;
  }
  // Four sequences in one DraftModel with a catch-up budget of 16 tokens
  // per call; each step appends 1-3 tokens to every history, some of them
  // the draft's own proposal (accepted), some random (a rejection).
  spec::DraftModel d(m.model, pool, KvType::F16, 4, 128, 16);
  std::vector<std::vector<int32_t>> hist;
  for (const GenerationRequest& r : base) hist.push_back(r.prompt);
  std::vector<std::vector<int32_t>> outs(hist.size());
  std::mt19937 rng(7);
  int32_t compared = 0, accepted = 0;
  for (int step = 0; step < 30; ++step) {
    std::vector<spec::DraftModel::Request> reqs;
    for (size_t i = 0; i < hist.size(); ++i)
      if (hist[i].size() + kK < 120) reqs.push_back({i + 1, hist[i], kK, &outs[i]});
    if (reqs.empty()) break;
    d.propose(reqs);
    for (const spec::DraftModel::Request& r : reqs) {
      std::vector<int32_t>& h = hist[r.seq - 1];
      const std::vector<int32_t>& out = *r.out;
      if (!out.empty()) {  // empty while catching up
        EXPECT_EQ(out, fresh(h)) << "sequence " << r.seq << " at " << h.size() << " tokens";
        ++compared;
      }
      const auto take = static_cast<size_t>(rng() % 3);  // accepted draft tokens
      for (size_t j = 0; j < take && j < out.size(); ++j, ++accepted) h.push_back(out[j]);
      h.push_back(static_cast<int32_t>(rng() % static_cast<uint32_t>(m.model.config().n_vocab)));
    }
    d.blocks().validate();
  }
  EXPECT_GT(compared, 40);
  EXPECT_GT(accepted, 20);
  for (size_t i = 0; i < hist.size(); ++i) d.release(i + 1);
  d.blocks().validate();
  EXPECT_EQ(d.blocks().n_used(), 0);
  EXPECT_EQ(d.blocks().n_sequences(), 0);
}

// A draft pool with room for one context (128 positions, 8 blocks): a
// sequence not proposing in a call is evicted for one that is, and its next
// proposal (caught up again) is still the greedy continuation; sequences
// proposing in the same call never evict each other (the one that does not
// fit gets nothing).
TEST(EngineSpecDraft, AFullDraftPoolEvictsIdleSequences) {
  LOAD_STORIES(m);
  const std::vector<GenerationRequest> base = base_requests(*m.tok);
  ThreadPool pool(2);
  constexpr int32_t kK = 3;
  auto fresh = [&](std::span<const int32_t> tokens) { return fresh_proposal(m, pool, tokens, kK); };
  spec::DraftModel d(m.model, pool, KvType::F16, 1, 128, 512);
  ASSERT_EQ(d.blocks().n_blocks(), 8);
  // Prompts of 3-4 blocks each: two fit at once, not three.
  const std::vector<int32_t>& a = base[0].prompt;
  const std::vector<int32_t>& b = base[2].prompt;
  ASSERT_GT(a.size(), 32u);
  ASSERT_GT(b.size(), 32u);
  std::vector<int32_t> c = a;
  c[1] = (c[1] + 1) % m.model.config().n_vocab;  // no prefix shared with a
  std::vector<int32_t> out;
  for (int round = 0; round < 2; ++round) {
    for (uint64_t id = 1; id <= 3; ++id) {
      const std::vector<int32_t>& t = id == 1 ? a : id == 2 ? b : c;
      std::vector<spec::DraftModel::Request> r{{id, t, kK, &out}};
      d.propose(r);
      EXPECT_EQ(out, fresh(t)) << "sequence " << id << " round " << round;
      d.blocks().validate();
      EXPECT_LE(d.blocks().n_sequences(), 2);
    }
  }
  // All three in one call: the pool holds two.
  std::vector<std::vector<int32_t>> outs(3);
  std::vector<spec::DraftModel::Request> all{{4, a, kK, &outs[0]}, {5, b, kK, &outs[1]}, {6, c, kK, &outs[2]}};
  d.propose(all);
  int32_t proposed = 0;
  for (const spec::DraftModel::Request& r : all)
    if (!r.out->empty()) {
      EXPECT_EQ(*r.out, fresh(r.tokens)) << "sequence " << r.seq;
      ++proposed;
    }
  EXPECT_GE(proposed, 1);
  EXPECT_LE(proposed, 2);
  d.blocks().validate();
}

// Sequences that end, are cancelled or preempted free their draft KV.
TEST(EngineSpecDraft, CancelledAndFinishedSequencesFreeTheirDraftKv) {
  LOAD_STORIES(m);
  NEXUS_REQUIRE_SHARED(draft_path, "arch/llama-d256-F32.gguf");
  EngineOptions o = opts();
  o.spec.draft_model = &nexus::test::loaded_model(draft_path).model;
  Engine e(m.model, *m.tok, o);
  std::vector<std::shared_ptr<Result>> results;
  std::vector<std::shared_ptr<RequestHandle>> handles;
  for (const GenerationRequest& base : base_requests(*m.tok)) {
    GenerationRequest r = base;
    r.stop.max_tokens = 100;
    auto res = std::make_shared<Result>();
    handles.push_back(e.submit(r, nexus::test::into(res)));
    ASSERT_NE(handles.back(), nullptr);
    results.push_back(res);
  }
  // Cancel two once the draft model holds KV for someone.
  for (int i = 0; i < 2000 && e.stats().draft_sequences == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_GT(e.stats().draft_sequences, 0);
  handles[0]->cancel();
  handles[2]->cancel();
  for (auto& r : results) EXPECT_TRUE(r->wait());
  const EngineStats s = idle_stats(e);
  EXPECT_GT(s.spec_proposed_draft, 0);
  expect_no_kv_held(s, "after cancellation");
  EXPECT_GT(s.draft_kv_blocks_total, 0);
}

// A draft of another vocabulary is refused: by the check the CLI runs
// (sizes, then token texts), by the engine (n_vocab), and by
// `nexus serve --draft-model` (non-zero exit, a message naming the draft).
TEST(EngineSpecDraft, ADraftOfAnotherVocabularyIsRefused) {
  LOAD_STORIES(stories);
  NEXUS_REQUIRE_SHARED(tiny_path, "TinyLLama-v0.F32.gguf");
  Loaded& tiny = nexus::test::loaded_model(tiny_path);
  try {
    spec::check_same_vocabulary(*tiny.tok, *stories.tok);
    ADD_FAILURE() << "512 tokens accepted as a draft for 32000";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("512 tokens, the target's 32000"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(spec::check_same_vocabulary(*stories.tok, *stories.tok));
  // Same size, other texts: Llama 2's SentencePiece vocabulary against open_llama's (TinyLLama-v0).
  NEXUS_REQUIRE_SHARED(spm_path, "tokenizers/ggml-vocab-llama-spm.gguf");
  const GgufFile spm_gguf(spm_path);
  const std::unique_ptr<Tokenizer> spm = Tokenizer::from_gguf(spm_gguf);
  ASSERT_EQ(spm->n_vocab(), tiny.tok->n_vocab());
  try {
    spec::check_same_vocabulary(*tiny.tok, *spm);
    ADD_FAILURE() << "a vocabulary of other token texts accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the draft model's token "), std::string::npos) << e.what();
  }
  // Same tokens, another BOS, then another EOS (vocabulary-only GGUFs).
  struct Vocab {
    std::vector<uint8_t> image;
    std::unique_ptr<GgufFile> file;
    std::unique_ptr<Tokenizer> tok;
  };
  auto vocab = [](uint32_t bos, uint32_t eos) {
    nexus::test::GgufWriter w;
    const std::vector<std::string> texts = {"<unk>", "<s>", "</s>", "a", "b"};
    std::vector<nexus::test::GgufWriter::Value> toks, scores, types;
    for (size_t i = 0; i < texts.size(); ++i) {
      toks.push_back(w.str(texts[i]));
      scores.push_back(w.f32(0));
      types.push_back(w.i32(i == 0 ? 2 : i < 3 ? 3 : 1));
    }
    w.kv("tokenizer.ggml.model", w.str("llama"));
    w.kv("tokenizer.ggml.tokens", w.array(GgufValueType::STRING, toks));
    w.kv("tokenizer.ggml.scores", w.array(GgufValueType::FLOAT32, scores));
    w.kv("tokenizer.ggml.token_type", w.array(GgufValueType::INT32, types));
    w.kv("tokenizer.ggml.bos_token_id", w.u32(bos));
    w.kv("tokenizer.ggml.eos_token_id", w.u32(eos));
    auto v = std::make_unique<Vocab>();
    v->image = w.build();
    v->file = std::make_unique<GgufFile>(std::span<const uint8_t>(v->image), "vocab.gguf");
    v->tok = Tokenizer::from_gguf(*v->file);
    return v;
  };
  const auto target = vocab(1, 2), other_bos = vocab(2, 2), other_eos = vocab(1, 1);
  EXPECT_NO_THROW(spec::check_same_vocabulary(*target->tok, *vocab(1, 2)->tok));
  for (const auto* v : {other_bos.get(), other_eos.get()}) {
    try {
      spec::check_same_vocabulary(*target->tok, *v->tok);
      ADD_FAILURE() << "another BOS or EOS accepted";
    } catch (const Error& e) {
      const std::string want = v == other_bos.get() ? "BOS token is 2, the target's 1" : "EOS token is 1, the target's 2";
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  }
  EngineOptions o = opts();
  o.spec.draft_model = &stories.model;
  EXPECT_THROW(Engine(tiny.model, *tiny.tok, o), Error);
  const nexus::test::CommandResult r = nexus::test::run_nexus(
      "serve --port 0 -m " + nexus::test::shell_quote(tiny_path) + " --draft-model " +
      nexus::test::shell_quote(stories_path));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("--draft-model"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("vocabulary has 512 tokens, the target's 32000"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("listening"), std::string::npos) << r.out;
  // A draft that --spec-max-seqs 0 would never run is refused too.
  const nexus::test::CommandResult off = nexus::test::run_nexus(
      "serve --port 0 --spec-max-seqs 0 -m " + nexus::test::shell_quote(stories_path) + " --draft-model " +
      nexus::test::shell_quote(stories_path));
  EXPECT_EQ(off.exit_code, 2) << off.err;  // an unsupported combination of options: a usage error
  EXPECT_NE(off.err.find("--draft-model with --spec-max-seqs 0"), std::string::npos) << off.err;
  // A missing draft file is named as the draft's (not as -m's).
  const nexus::test::CommandResult missing = nexus::test::run_nexus(
      "serve --port 0 -m " + nexus::test::shell_quote(stories_path) + " --draft-model /nonexistent/draft.gguf");
  EXPECT_EQ(missing.exit_code, 1) << missing.err;
  EXPECT_NE(missing.err.find("--draft-model /nonexistent/draft.gguf: draft model file not found: /nonexistent/draft.gguf"),
            std::string::npos)
      << missing.err;
  EXPECT_EQ(missing.err.find("-m PATH"), std::string::npos) << missing.err;
  // So is prompt lookup, and an empty --draft-model (once silently no draft).
  const nexus::test::CommandResult ngram_off = nexus::test::run_nexus(
      "serve --port 0 --spec-max-seqs 0 --spec ngram -m " + nexus::test::shell_quote(stories_path));
  EXPECT_EQ(ngram_off.exit_code, 2) << ngram_off.err;
  EXPECT_NE(ngram_off.err.find("--spec ngram with --spec-max-seqs 0"), std::string::npos) << ngram_off.err;
  const nexus::test::CommandResult empty = nexus::test::run_nexus(
      "serve --port 0 -m " + nexus::test::shell_quote(stories_path) + " --draft-model ''");
  EXPECT_NE(empty.exit_code, 0) << empty.err;
  EXPECT_NE(empty.err.find("an empty path names no model"), std::string::npos) << empty.err;
  EXPECT_EQ(empty.out.find("listening"), std::string::npos) << empty.out;
}

}  // namespace
