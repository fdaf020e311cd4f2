// Speculative decoding benchmark (docs/speculative.md), in-process, no HTTP:
// each workload runs with speculation off and on, alternating, in the same
// process; prints a Markdown table for docs/benchmarks.md.
//   lookup-repeat  text that repeats its prompt, --spec ngram: one greedy
//                  stream at a time on each of 3 prompts, each a seed ("Sue
//                  ran to the tree. Sue ran to the tree.") and the model's
//                  own first GENERATED tokens after it; the 3 seeds of 24
//                  whose next GENERATED tokens repeat the text before them
//                  most (the share of tokens that 3-gram lookup over the
//                  text before each predicts; printed). TinyLLama-v0 never
//                  copies a text it is given, but its stories fall into
//                  repeating their own sentences: these are such texts.
//   lookup-plain   one greedy stream on a prompt that does not, --spec ngram
//   edit           one greedy stream with a prediction = its own greedy answer
//                  with 10% of the tokens changed (the shape of a code edit)
//   8-streams      8 concurrent greedy streams of different prompts, --spec ngram
//                  (default adaptive rule: no speculation above 4 running)
//   draft-plain    with DRAFT.gguf: lookup-plain's stream, --draft-model DRAFT
//   draft-4        with DRAFT.gguf: 4 of the 8 streams, --draft-model DRAFT
// Output tokens/s (generated tokens / wall time of the round) and ITL p99.
//
// usage: bench_spec [MODEL.gguf] [THREADS] [GENERATED] [ROUNDS] [DRAFT.gguf]
//   default: ../shared/models/TinyLLama-v0.F32.gguf, 2 threads, 48 tokens, 20 rounds, no draft
//   (TinyLLama-v0's context is 128 tokens: 2 x GENERATED + a few must fit);
//   --help says so; a value out of range exits 2, a failure 1.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "engine/engine.h"
#include "engine/spec/draft_model.h"
#include "engine/spec/ngram.h"
#include "gguf/gguf_file.h"
#include "model/llama_model.h"
#include "tokenizer/tokenizer.h"

using namespace nexus;
using Clock = std::chrono::steady_clock;

namespace {

struct Round {
  double seconds = 0;
  int64_t tokens = 0;
  std::vector<double> itl;  // every gap between two tokens' events
  std::vector<std::vector<int32_t>> outputs;
};

Round run(Engine& e, const std::vector<GenerationRequest>& reqs) {
  std::mutex mu;
  std::condition_variable cv;
  int remaining = static_cast<int>(reqs.size());
  Round r;
  r.outputs.resize(reqs.size());
  std::vector<Clock::time_point> last(reqs.size());
  const Clock::time_point start = Clock::now();
  for (size_t i = 0; i < reqs.size(); ++i) {
    last[i] = start;
    e.submit(reqs[i], [&, i](const GenerationEvent& ev) {
      std::lock_guard lock(mu);
      const Clock::time_point now = Clock::now();
      if (ev.token >= 0) {
        if (!r.outputs[i].empty()) r.itl.push_back(std::chrono::duration<double>(now - last[i]).count());
        r.outputs[i].push_back(ev.token);
        last[i] = now;
      }
      if (ev.done && --remaining == 0) cv.notify_all();
    });
  }
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return remaining == 0; });
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (const auto& o : r.outputs) r.tokens += static_cast<int64_t>(o.size());
  return r;
}

// The requests one after another, each alone in the engine: one round.
Round run_one_at_a_time(Engine& e, const std::vector<GenerationRequest>& reqs) {
  Round all;
  for (const GenerationRequest& req : reqs) {
    Round r = run(e, {req});
    all.seconds += r.seconds;
    all.tokens += r.tokens;
    all.itl.insert(all.itl.end(), r.itl.begin(), r.itl.end());
    all.outputs.push_back(std::move(r.outputs[0]));
  }
  return all;
}

// The share of tokens[from, end) that 3-gram lookup over the tokens before
// each predicts as its next token (spec::ngram_propose with k = 1).
double lookup_hit_rate(const std::vector<int32_t>& tokens, size_t from) {
  std::vector<int32_t> guess;
  int hits = 0;
  for (size_t i = from; i < tokens.size(); ++i) {
    spec::ngram_propose(std::span(tokens.data(), i), 3, 1, guess);
    hits += !guess.empty() && guess[0] == tokens[i];
  }
  return tokens.size() > from ? static_cast<double>(hits) / static_cast<double>(tokens.size() - from) : 0;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double p99(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::min(v.size() - 1, static_cast<size_t>(0.99 * static_cast<double>(v.size())))];
}

GenerationRequest greedy(std::vector<int32_t> prompt, int32_t n) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.sampling.temperature = 0;
  r.stop.max_tokens = n;
  r.stop.ignore_eos = true;
  return r;
}

}  // namespace

struct Args {
  std::string path = "../shared/models/TinyLLama-v0.F32.gguf";
  int threads = 2;
  int gen = 48;
  int rounds = 20;
  std::string draft_path;  // empty: no draft rows
};

int bench(const Args& a);

int main(int argc, char** argv) {
  Args a;
  CLI::App app("Speculative decoding benchmark: each workload with speculation off and on, alternated; a "
               "Markdown table on stdout (docs/benchmarks.md).",
               "bench_spec");
  app.add_option("model", a.path, "the model GGUF")->capture_default_str();
  app.add_option("threads", a.threads, "kernel threads")->capture_default_str()->check(cli::range(1, 1024));
  app.add_option("generated", a.gen, "tokens generated per stream (TinyLLama-v0's 128-token context holds 2 x this "
                                     "+ a few)")
      ->capture_default_str()
      ->check(cli::range(1, 100000));
  app.add_option("rounds", a.rounds, "timed rounds per workload (a fresh engine each; one more untimed first)")
      ->capture_default_str()
      ->check(cli::range(1, 100000));
  app.add_option("draft", a.draft_path, "a draft model GGUF of the same vocabulary: adds the draft-plain and "
                                        "draft-4 streams rows");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help: 0; a usage error: 2
  }
  try {
    return bench(a);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_spec: %s\n", e.what());
    return 1;
  }
}

int bench(const Args& a) {
  const std::string& path = a.path;
  const int threads = a.threads, gen = a.gen, rounds = a.rounds;
  GgufFile gguf(path);
  auto tok = Tokenizer::from_gguf(gguf);
  LlamaModel model(gguf);
  const int32_t n_vocab = model.config().n_vocab;
  std::unique_ptr<GgufFile> draft_gguf;
  std::unique_ptr<LlamaModel> draft;
  if (!a.draft_path.empty()) {
    draft_gguf = std::make_unique<GgufFile>(a.draft_path);
    spec::check_same_vocabulary(*tok, *Tokenizer::from_gguf(*draft_gguf));
    draft = std::make_unique<LlamaModel>(*draft_gguf);
  }

  const std::string story =
      "Once upon a time, there was a little girl named Lily. She loved to play in the park with her dog Max. ";
  struct Workload {
    std::string name;
    std::vector<GenerationRequest> reqs;
    SpecProposer proposer;
    bool draft = false;           // with the draft model (and no n-gram lookup)
    bool one_at_a_time = false;   // the requests one after another, not at once
  };
  std::vector<Workload> workloads;
  {  // lookup-repeat (above): every seed's 2 x gen greedy tokens in one batch
    EngineOptions o;
    o.n_threads = threads;
    Engine e(model, *tok, o);
    const char* names[] = {"Tom", "Sue", "Ben"};
    const char* acts[] = {"had a", "ran to the", "saw a big", "liked the"};
    const char* objs[] = {"tree", "ball"};
    std::vector<std::vector<int32_t>> seeds;
    std::vector<std::string> texts;
    std::vector<GenerationRequest> reqs;
    for (const char* n : names)
      for (const char* a : acts)
        for (const char* b : objs) {
          const std::string sentence = std::string(n) + " " + a + " " + b + ".";
          texts.push_back(sentence + " " + sentence);
          seeds.push_back(tok->encode(texts.back(), true));
          reqs.push_back(greedy(seeds.back(), 2 * gen));
        }
    const Round r = run(e, reqs);
    std::vector<std::pair<double, size_t>> ranked;  // (hit rate of the second half, seed)
    for (size_t i = 0; i < seeds.size(); ++i) {
      std::vector<int32_t> all = seeds[i];
      all.insert(all.end(), r.outputs[i].begin(), r.outputs[i].end());
      ranked.emplace_back(lookup_hit_rate(all, seeds[i].size() + static_cast<size_t>(gen)), i);
    }
    std::sort(ranked.rbegin(), ranked.rend());
    Workload w{"lookup-repeat", {}, SpecProposer::Ngram, false, true};
    for (size_t j = 0; j < 3; ++j) {
      const size_t i = ranked[j].second;
      std::vector<int32_t> prompt = seeds[i];
      prompt.insert(prompt.end(), r.outputs[i].begin(), r.outputs[i].begin() + gen);
      w.reqs.push_back(greedy(prompt, gen));
      std::fprintf(stderr, "lookup-repeat: \"%s\" + %d tokens: lookup predicts %.0f%% of the next %d\n",
                   texts[i].c_str(), gen, 100 * ranked[j].first, gen);
    }
    workloads.push_back(std::move(w));
  }
  workloads.push_back({"lookup-plain", {greedy(tok->encode("Tom had a red truck", true), gen)}, SpecProposer::Ngram});
  {  // edit: the prediction is the greedy answer with 10% of the tokens changed
    GenerationRequest r = greedy(tok->encode("The little dog", true), gen);
    EngineOptions o;
    o.n_threads = threads;
    Engine e(model, *tok, o);
    std::vector<int32_t> p = run(e, {r}).outputs[0];
    std::mt19937 rng(1);
    for (size_t i = 0; i < p.size(); ++i)
      if (rng() % 10 == 0) p[i] = static_cast<int32_t>(rng() % static_cast<uint32_t>(n_vocab));
    r.prediction = p;
    workloads.push_back({"edit (prediction)", {r}, SpecProposer::None});
  }
  {
    std::vector<GenerationRequest> reqs;
    const char* starts[] = {"Once upon a time", "Lily and Max", "The sun", "Tom had a red truck",
                            "One day", "A big cat", "The girl", "In the park"};
    for (int i = 0; i < 8; ++i) reqs.push_back(greedy(tok->encode(i % 2 ? story + starts[i] : starts[i], true), gen));
    // (odd ones repeat part of their prompt: some lookup hits)
    workloads.push_back({"8 streams", reqs, SpecProposer::Ngram});
    if (draft) {
      workloads.push_back({"draft-plain", {greedy(tok->encode("Tom had a red truck", true), gen)}, SpecProposer::None, true});
      workloads.push_back({"draft-4 streams", std::vector<GenerationRequest>(reqs.begin(), reqs.begin() + 4),
                           SpecProposer::None, true});
    }
  }

  std::printf("| workload | off: tok/s | on: tok/s | speedup | off: ITL p99 ms | on: ITL p99 ms | accepted/proposed | same output |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (const Workload& w : workloads) {
    std::vector<double> tps[2], itl[2];
    std::vector<std::vector<int32_t>> outs[2];
    int64_t proposed = 0, accepted = 0;
    for (int round = 0; round < rounds + 1; ++round) {
      for (int on = 0; on < 2; ++on) {
        EngineOptions o;
        o.n_threads = threads;
        if (on) o.spec.proposer = w.proposer;
        else o.spec.max_seqs = 0;  // no speculation at all (not even the prediction)
        if (on && w.draft) o.spec.draft_model = draft.get();
        Engine e(model, *tok, o);
        const Round r = w.one_at_a_time ? run_one_at_a_time(e, w.reqs) : run(e, w.reqs);
        if (round == 0) continue;  // warm-up
        tps[on].push_back(static_cast<double>(r.tokens) / r.seconds);
        itl[on].insert(itl[on].end(), r.itl.begin(), r.itl.end());
        outs[on] = r.outputs;
        if (on) {
          const EngineStats s = e.stats();
          proposed += s.spec_proposed_ngram + s.spec_proposed_prediction + s.spec_proposed_draft;
          accepted += s.spec_accepted_ngram + s.spec_accepted_prediction + s.spec_accepted_draft;
        }
      }
    }
    const double off = median(tps[0]), on = median(tps[1]);
    std::printf("| %s | %.1f | %.1f | %.2fx | %.3f | %.3f | %lld/%lld | %s |\n", w.name.c_str(), off, on, on / off,
                1e3 * p99(itl[0]), 1e3 * p99(itl[1]), static_cast<long long>(accepted),
                static_cast<long long>(proposed), outs[0] == outs[1] ? "yes" : "NO");
    std::fflush(stdout);
  }
  return 0;
}
