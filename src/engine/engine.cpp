// Engine: an inbox (mutex + condition variable) in front of one engine thread
// that owns the KV cache, the scheduler and the batched forward pass, and
// runs steps while any sequence is running or waiting.
#include "engine/engine.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "engine/block_manager.h"
#include "engine/engine_metrics.h"
#include "engine/kv_pool_sizes.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "engine/spec/draft_model.h"
#include "engine/speculator.h"
#include "grammar/automaton_cache.h"
#include "grammar/loop_index.h"
#include "grammar/vocab_trie.h"
#include "kernels/thread_pool.h"
#include "model/batch_forward.h"
#include "model/kv_cache.h"
#include "model/llama_model.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace nexus {

namespace {

// Each id's bytes for grammar matching: control and unknown tokens and the
// ids past the tokenizer's vocabulary have none (never allowed by a
// grammar); end-of-generation tokens are decided by the matcher's can_end().
std::shared_ptr<const grammar::VocabTrie> grammar_vocab(const Tokenizer& tok, int32_t n_vocab) {
  std::vector<std::string> pieces(static_cast<size_t>(n_vocab));
  for (int32_t id = 0; id < n_vocab && id < tok.n_vocab(); ++id)
    if (!tok.is_eog(id)) pieces[static_cast<size_t>(id)] = tok.token_to_piece(id, false);
  auto trie = std::make_shared<grammar::VocabTrie>(pieces);
  trie->loop_index(grammar::json_string_loop_bytes());  // (grammar/loop_index.h)
  return trie;
}

// GenerationEvent::error_code of a failure: a grammar past the matcher's
// bounds is the request's fault; anything else the server's ("").
std::string request_error_code(const std::exception& e) {
  return dynamic_cast<const grammar::GrammarLimit*>(&e) ? "grammar_too_complex" : "";
}

GenerationEvent final_event(const GenerationJob& job, FinishReason reason, const std::string& error,
                            const std::string& error_code = {}) {
  GenerationEvent ev;
  ev.done = true;
  ev.finish = reason;
  ev.error = error;
  ev.error_code = error_code;
  ev.usage.prompt_tokens = static_cast<int32_t>(job.req.prompt.size());
  ev.timings.queue_s = ev.timings.e2e_s = std::chrono::duration<double>(Clock::now() - job.submitted).count();
  return ev;
}

// A final event for a job that never became a sequence; never throws.
void finish_unrun(const GenerationJob& job, FinishReason reason, const std::string& error = {}) {
  try {
    job.on_event(final_event(job, reason, error));
  } catch (...) {
    // Nothing more to tell a callback that throws on its final event.
  }
}

}  // namespace

struct Engine::Impl {
  Impl(const LlamaModel& model, const Tokenizer& tok, const EngineOptions& o, int32_t ctx)
      : tok(tok),
        n_vocab(model.config().n_vocab),
        max_queue(o.max_queue),
        pool_sizes(kv_pool_sizes(model.config(), o, ctx)),
        cache(model.config(), pool_sizes.n_blocks, kDefaultBlockSize, o.kv_type, pool_sizes.n_swa_blocks),
        blocks(cache.n_blocks(), cache.block_size(), cache.n_swa_blocks(), cache.split() ? model.config().n_swa : 0),
        sched(blocks, o.max_seqs, o.max_batch_tokens),
        forward(model, cache, o.n_threads, std::min(ctx, cache.n_blocks() * cache.block_size())),
        n_ctx(std::min(ctx, cache.n_blocks() * cache.block_size())),
        validate_kv(o.validate_kv),
        speculator(o.spec, n_ctx,
                   o.spec.draft_model ? std::make_unique<spec::DraftModel>(
                                            *o.spec.draft_model, forward.pool(), o.kv_type,
                                            std::min(o.max_seqs, std::max(1, o.spec.max_seqs)), n_ctx,
                                            o.max_batch_tokens)
                                      : nullptr) {
    sched.set_reclaim([this] { return release_oldest_session(); });
  }

  void loop();
  void accept(GenerationJob job);
  void reap_cancelled();
  void check_kv();
  void step();
  void note_verified(DraftSource source, int32_t proposed, int32_t accepted);
  void retire(Sequence* s);
  void publish();
  void leave_queue(int32_t n);  // n requests stopped waiting for admission
  void end_sessions();           // those end_session() asked for
  bool release_oldest_session();
  void release_session(uint64_t id);
  void shutdown();

  const Tokenizer& tok;
  const int32_t n_vocab;
  const int32_t max_queue;
  EngineMetrics metrics;  // updated by the engine thread, rendered by any
  // Engine thread only (after construction):
  const KvPoolSizes pool_sizes;
  KvCache cache;
  BlockManager blocks;
  Scheduler sched;
  BatchForward forward;
  const int32_t n_ctx;
  const bool validate_kv;
  Speculator speculator;
  std::vector<Sequence*> draft_failed;  // step()'s scratch: sequences the draft model failed for
  struct SpecStats {
    int64_t proposed_prediction = 0, accepted_prediction = 0, proposed_draft = 0, accepted_draft = 0,
            proposed_ngram = 0, accepted_ngram = 0, verify_runs = 0;
  } spec_stats;
  std::vector<std::unique_ptr<Sequence>> seqs;
  std::vector<SeqRun> runs;
  struct Sampled {  // a sequence whose run completed in this step
    Sequence* seq;
    std::span<const float> logits;  // its rows, [n_draft + 1, n_vocab]
    size_t run = 0;                 // its index in the plan's runs
    std::vector<int32_t> ids;       // the tokens it emits: accepted draft tokens, then the next one
    std::string error;              // why sampling failed, or empty
    std::string error_code;         // GenerationEvent::error_code of it
  };
  std::vector<Sampled> sampled;
  uint64_t n_arrived = 0;
  // The vocabulary as a trie for grammar masks (0.1-0.2 s for a 32k
  // vocabulary on 2 busy cores, more for 150k): the first request with a
  // grammar starts its build on a worker thread (trie_build) and waits,
  // unadmitted, in waiting_trie, while the other sequences go on decoding;
  // then every grammar request shares it. Built once per engine, and only
  // by an engine that meets a grammar (tests and plain serving never pay).
  std::shared_ptr<const grammar::VocabTrie> vocab_trie;
  std::shared_future<std::shared_ptr<const grammar::VocabTrie>> trie_build;
  std::deque<GenerationJob> waiting_trie;
  // One automaton per grammar text, shared by its requests (states, masks).
  grammar::AutomatonCache automata;
  struct Kept {
    BlockManager::SeqId kv;
    uint64_t last_use;
  };
  std::unordered_map<uint64_t, Kept> kept;  // session -> its KV
  uint64_t n_kept = 0;                      // use counter for LRU

  mutable std::mutex mu;
  std::condition_variable cv;
  std::deque<GenerationJob> inbox;                      // guarded by mu
  std::vector<std::shared_ptr<RequestHandle>> live;     // guarded by mu: submitted, not finished
  std::vector<uint64_t> ending;                         // guarded by mu: end_session() ids
  int32_t unadmitted = 0;                               // guarded by mu: inbox + never admitted
  bool stopping = false;                                // guarded by mu
  bool trie_built = false;                              // guarded by mu: trie_build is ready
  EngineStats stats;                                    // guarded by mu
  std::thread thread;
};

void Engine::Impl::loop() {
  for (;;) {
    std::deque<GenerationJob> arrived;
    {
      std::unique_lock lock(mu);
      if (seqs.empty())
        cv.wait(lock, [&] {
          return stopping || !inbox.empty() || !ending.empty() || (trie_built && !waiting_trie.empty());
        });
      if (stopping) break;
      arrived.swap(inbox);
      if (trie_built && !waiting_trie.empty()) {
        arrived.insert(arrived.begin(), std::make_move_iterator(waiting_trie.begin()),
                       std::make_move_iterator(waiting_trie.end()));
        waiting_trie.clear();
      }
    }
    end_sessions();
    for (GenerationJob& job : arrived) accept(std::move(job));
    reap_cancelled();
    if (!seqs.empty()) step();
    if (validate_kv) check_kv();
    publish();
  }
  shutdown();
}

void Engine::Impl::accept(GenerationJob job) {
  std::unique_ptr<Sequence> seq;
  try {
    validate_request(job.req, n_ctx, n_vocab);
    if (job.req.grammar && !vocab_trie) {
      if (!trie_build.valid()) {
        trie_build = std::async(std::launch::async, [this] {
                       struct Done {  // tells the loop, even when the build throws
                         Impl* impl;
                         ~Done() {
                           {
                             std::lock_guard lock(impl->mu);
                             impl->trie_built = true;
                           }
                           impl->cv.notify_all();
                         }
                       } done{this};
                       return std::shared_ptr<const grammar::VocabTrie>(grammar_vocab(tok, n_vocab));
                     }).share();
      }
      bool built = false;
      {
        std::lock_guard lock(mu);
        built = trie_built;
      }
      if (!built) {
        waiting_trie.push_back(std::move(job));  // admitted by loop() once the trie is built
        return;
      }
      vocab_trie = trie_build.get();  // (the worker is returning: at most microseconds) rethrows what it threw
    }
    // (A grammar too large to follow is refused here, by the matcher.)
    seq = std::make_unique<Sequence>(job, tok, n_vocab, n_arrived + 1, &metrics,
                                     job.req.grammar ? automata.get(job.req.grammar, vocab_trie) : nullptr);
    ++n_arrived;
  } catch (const std::exception& e) {
    const GenerationEvent ev = final_event(job, FinishReason::Error, e.what(), request_error_code(e));
    metrics.observe_request(request_record(ev, ev.timings.e2e_s, 0));
    try {
      job.on_event(ev);
    } catch (...) {
      // Nothing more to tell a callback that throws on its final event.
    }
    leave_queue(1);
    std::lock_guard lock(mu);
    std::erase(live, job.handle);
    return;
  }
  const uint64_t session = job.req.session;
  seqs.push_back(std::move(seq));
  Sequence* s = seqs.back().get();
  if (auto it = kept.find(session); session != 0 && it != kept.end()) {
    // Keep the longest common prefix; at least the last prompt token is evaluated.
    const BlockManager::SeqId kv = it->second.kv;
    kept.erase(it);
    const std::span<const int32_t> have = blocks.tokens(kv);
    const size_t limit = std::min(have.size(), s->tokens.size() - 1);
    size_t common = 0;
    while (common < limit && have[common] == s->tokens[common]) ++common;
    // Nothing kept (a window's blocks were given back, or no common block):
    // the prefix cache may still hold the prompt's beginning.
    if (blocks.truncate(kv, static_cast<int32_t>(common)) > 0) s->resume_kv = kv;
    else blocks.release(kv);
  }
  sched.add(s);
}

void Engine::Impl::end_sessions() {
  std::vector<uint64_t> ids;
  {
    std::lock_guard lock(mu);
    ids.swap(ending);
  }
  for (uint64_t id : ids) release_session(id);
}

void Engine::Impl::release_session(uint64_t id) {
  auto it = kept.find(id);
  if (it == kept.end()) return;
  blocks.release(it->second.kv);
  kept.erase(it);
}

bool Engine::Impl::release_oldest_session() {
  if (kept.empty()) return false;
  auto oldest = kept.begin();
  for (auto it = kept.begin(); it != kept.end(); ++it)
    if (it->second.last_use < oldest->second.last_use) oldest = it;
  release_session(oldest->first);
  return true;
}

void Engine::Impl::reap_cancelled() {
  for (size_t i = 0; i < seqs.size();) {
    Sequence* s = seqs[i].get();
    if (!s->cancelled()) {
      ++i;
      continue;
    }
    s->finish(FinishReason::Cancelled);
    retire(s);  // erases seqs[i]
  }
}

void Engine::Impl::retire(Sequence* s) {
  if (s->n_cached_first < 0) leave_queue(1);  // left without ever being admitted
  speculator.release(s->arrival);
  const uint64_t session = s->session();
  if (session != 0) {
    if (const BlockManager::SeqId kv = sched.detach(s)) {
      release_session(session);  // an older kept state of the same session
      kept[session] = Kept{kv, ++n_kept};
    }
  } else {
    sched.remove(s);
  }
  std::shared_ptr<RequestHandle> handle = s->handle();
  std::erase_if(seqs, [s](const std::unique_ptr<Sequence>& p) { return p.get() == s; });
  std::lock_guard lock(mu);
  std::erase(live, handle);
}

void Engine::Impl::check_kv() {
  try {
    blocks.validate();
    if (const spec::DraftModel* d = speculator.draft()) d->blocks().validate();
  } catch (const std::exception& e) {
    while (!seqs.empty()) {
      Sequence* s = seqs.back().get();
      s->fail(e.what());
      retire(s);
    }
  }
}

void Engine::Impl::step() {
  // The whole step is what a draft token adds to (its forward-pass share,
  // its logits row sampled, its events): timed from here to the end, less
  // the draft model's passes (timed as their own cost: DraftModel::pass_cost).
  const Clock::time_point step_start = Clock::now();
  draft_failed.clear();
  const double draft_s = speculator.propose(sched.running(), draft_failed);
  for (Sequence* s : draft_failed) retire(s);
  StepPlan plan = sched.plan(Clock::now());
  const Clock::time_point start = Clock::now();
  for (SchedSeq* s : plan.admitted) static_cast<Sequence*>(s)->on_admitted(start);
  if (!plan.admitted.empty()) leave_queue(static_cast<int32_t>(plan.admitted.size()));
  for (SchedSeq* s : plan.preempted) {
    metrics.add_preemption();
    speculator.release(s->arrival);  // its draft KV: recomputed (mostly from its prefix cache) when it resumes
  }
  if (plan.runs.empty()) return;
  runs.clear();
  bool verifies = false;
  bool decodes_only = true;  // every run a decode or a verify run (no prefill chunk)
  for (const ScheduledRun& r : plan.runs) {
    decodes_only = decodes_only && r.completes && r.n_tokens == 1 + r.n_draft;
    SeqRun& run = runs.emplace_back();
    run.tokens = std::span<const int32_t>(r.seq->tokens.data() + r.n_past, static_cast<size_t>(r.n_tokens));
    run.n_past = r.n_past;
    run.block_table = blocks.block_table(r.seq->kv);
    run.swa_block_table = blocks.swa_block_table(r.seq->kv);
    run.want_logits = r.completes;
    const auto* seq = static_cast<const Sequence*>(r.seq);
    // A verify run: the logits after each of its tokens; a prompt scored for
    // echo + logprobs: those of every prompt position.
    run.all_logits = r.n_draft > 0 || (seq->wants_prompt_logprobs() && r.n_past < seq->prompt_size());
    verifies = verifies || r.n_draft > 0;
  }
  std::span<const float> logits;
  int32_t step_tokens = 0;
  for (const SeqRun& run : runs) step_tokens += static_cast<int32_t>(run.tokens.size());
  try {
    logits = forward.forward(runs);
  } catch (const std::exception& e) {
    // Validation failed (a bug, not input: requests were checked on arrival).
    for (const ScheduledRun& r : plan.runs) {
      auto* s = static_cast<Sequence*>(r.seq);
      s->fail(std::string("internal error in the forward pass: ") + e.what());
      retire(s);
    }
    return;
  }
  const Clock::time_point now = Clock::now();
  const double step_s = std::chrono::duration<double>(now - start).count();
  metrics.observe_step(step_s, plan.n_tokens, static_cast<int32_t>(plan.runs.size()));
  if (verifies) metrics.observe_verify_step(step_s);
  sampled.clear();
  std::vector<Sequence*> at_prompt_end;  // max_tokens 0: done, nothing to sample
  size_t row = 0;
  const auto nv = static_cast<size_t>(n_vocab);
  for (size_t i = 0; i < plan.runs.size(); ++i) {
    const ScheduledRun& r = plan.runs[i];
    auto* s = static_cast<Sequence*>(r.seq);
    if (runs[i].all_logits && r.n_draft == 0) {  // prompt logprobs (a draft is never proposed in a prefill)
      const auto n = static_cast<size_t>(r.n_tokens);
      s->on_prompt_logits(r.n_past, logits.subspan(row * nv, n * nv), n_vocab);
      row += n;
      if (r.completes) --row;  // the run's last row is also its sampling row
    }
    if (!r.completes) continue;
    const size_t n_rows = r.n_draft > 0 ? static_cast<size_t>(r.n_tokens) : 1;
    const std::span<const float> rows = logits.subspan(row * nv, n_rows * nv);
    row += n_rows;
    if (s->ends_at_prompt()) at_prompt_end.push_back(s);
    else sampled.push_back(Sampled{s, rows, i, {}, {}, {}});
  }
  // Sampling touches only each sequence's own sampler, so rows are sampled
  // on the kernel threads (a 32000-logit top_p row costs tens of us); the
  // events then go out in order on this thread. A verify run's rows are
  // sampled in order while each draw equals the draft token it follows
  // (engine.h: the exact acceptance rule for a point-mass proposal).
  auto sample_rows = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      Sampled& x = sampled[static_cast<size_t>(i)];
      const ScheduledRun& r = plan.runs[x.run];
      const size_t base = static_cast<size_t>(r.n_past + r.n_tokens - r.n_draft);  // tokens before the draft
      try {
        for (int32_t j = 0; j <= r.n_draft; ++j) {
          const int32_t id = x.seq->sample(x.logits.subspan(static_cast<size_t>(j) * n_vocab, n_vocab), base + j);
          x.ids.push_back(id);
          if (j == r.n_draft || id != x.seq->tokens[base + static_cast<size_t>(j)]) break;
        }
      } catch (const std::exception& e) {
        x.error = e.what();
        x.error_code = request_error_code(e);
      }
    }
  };
  if (sampled.size() > 1) forward.pool().parallel_for_stealing(static_cast<int64_t>(sampled.size()), 1, sample_rows);
  else sample_rows(0, static_cast<int64_t>(sampled.size()));
  // Verify runs keep the K/V of their real token and the accepted draft
  // tokens only: the rest is cut from the block table before commit, so the
  // prefix cache never hashes a rejected token.
  for (Sampled& x : sampled) {
    ScheduledRun& r = plan.runs[x.run];
    if (r.n_draft == 0) {
      if (!x.ids.empty()) x.seq->on_plain_token(x.ids[0]);
      continue;
    }
    Sequence* s = x.seq;
    const int32_t base = r.n_past + r.n_tokens - r.n_draft;
    int32_t accepted = 0;
    while (accepted < r.n_draft && accepted < static_cast<int32_t>(x.ids.size()) &&
           x.ids[static_cast<size_t>(accepted)] == s->tokens[static_cast<size_t>(base + accepted)])
      ++accepted;
    note_verified(s->draft_source(), r.n_draft, accepted);
    s->on_verified(r.n_draft, accepted);
    const int32_t keep = base + accepted;
    const int32_t kept = blocks.truncate(s->kv, keep);
    if (kept != keep && x.error.empty())
      x.error = "internal error: the KV of an accepted draft could not be kept";
    r.n_tokens = std::max(0, kept - r.n_past);
    // The real tokens end before the draft; on_token appends the accepted ones.
    s->n_draft = 0;
    s->tokens.resize(static_cast<size_t>(base));
    r.n_draft = 0;
  }
  sched.complete(plan);
  for (Sampled& x : sampled) {
    bool done = true;
    if (!x.error.empty()) {
      x.seq->fail(x.error, x.error_code);
    } else {
      try {
        for (int32_t id : x.ids)
          if ((done = x.seq->on_token(id, n_ctx, now))) break;
      } catch (const std::exception& e) {
        x.seq->fail(e.what(), request_error_code(e));
        done = true;
      } catch (...) {
        x.seq->fail("unknown error during generation");
        done = true;
      }
    }
    if (done) retire(x.seq);
  }
  for (Sequence* s : at_prompt_end) {
    s->finish(FinishReason::Length);
    retire(s);
  }
  int32_t emitted = 0;
  for (const Sampled& x : sampled) emitted += static_cast<int32_t>(x.ids.size());
  speculator.record_step(static_cast<int32_t>(runs.size()), step_tokens,
                         std::chrono::duration<double>(Clock::now() - step_start).count(), draft_s, verifies,
                         decodes_only, emitted);
}

void Engine::Impl::note_verified(DraftSource source, int32_t proposed, int32_t accepted) {
  ++spec_stats.verify_runs;
  int proposer = EngineMetrics::kProposerNgram;
  if (source == DraftSource::Prediction) {
    spec_stats.proposed_prediction += proposed;
    spec_stats.accepted_prediction += accepted;
    proposer = EngineMetrics::kProposerPrediction;
  } else if (source == DraftSource::Draft) {
    spec_stats.proposed_draft += proposed;
    spec_stats.accepted_draft += accepted;
    proposer = EngineMetrics::kProposerDraft;
  } else {
    spec_stats.proposed_ngram += proposed;
    spec_stats.accepted_ngram += accepted;
  }
  metrics.observe_draft(proposer, proposed, accepted);
}

void Engine::Impl::leave_queue(int32_t n) {
  std::lock_guard lock(mu);
  unadmitted -= n;
}

void Engine::Impl::publish() {
  std::lock_guard lock(mu);
  stats.running = static_cast<int32_t>(sched.running().size());
  stats.waiting = static_cast<int32_t>(sched.waiting().size()) + static_cast<int32_t>(inbox.size());
  stats.kv_blocks_total = blocks.n_blocks();
  stats.kv_blocks_used = blocks.n_used();
  stats.kv_blocks_cached = blocks.n_cached();
  stats.kv_blocks_free = blocks.n_free();
  stats.kv_swa_blocks_total = blocks.swa_pool().n_blocks();
  stats.kv_swa_blocks_used = blocks.swa_pool().n_used();
  stats.kv_swa_blocks_cached = blocks.swa_pool().n_cached();
  stats.kv_swa_blocks_free = blocks.swa_pool().n_free();
  stats.kv_swa_blocks_per_seq_max = blocks.stats().swa_blocks_per_seq_max;
  stats.swa_window = blocks.window();
  stats.block_size = blocks.block_size();
  stats.kv_bytes = static_cast<int64_t>(cache.total_bytes());
  stats.steps = static_cast<int64_t>(sched.steps());
  stats.preemptions = sched.preemptions();
  stats.prefix_queried_tokens = blocks.stats().queried_tokens;
  stats.prefix_hit_tokens = blocks.stats().hit_tokens;
  stats.sessions_kept = static_cast<int32_t>(kept.size());
  stats.spec_proposed_prediction = spec_stats.proposed_prediction;
  stats.spec_accepted_prediction = spec_stats.accepted_prediction;
  stats.spec_proposed_ngram = spec_stats.proposed_ngram;
  stats.spec_accepted_ngram = spec_stats.accepted_ngram;
  stats.spec_proposed_draft = spec_stats.proposed_draft;
  stats.spec_accepted_draft = spec_stats.accepted_draft;
  stats.spec_verify_runs = spec_stats.verify_runs;
  if (const spec::DraftModel* d = speculator.draft()) {
    stats.draft_kv_blocks_total = d->blocks().n_blocks();
    stats.draft_kv_blocks_used = d->blocks().n_used();
    stats.draft_sequences = d->blocks().n_sequences();
  }
  metrics.set_gauges({.running_sequences = stats.running,
                      .waiting_requests = stats.waiting,
                      .kv_blocks_total = stats.kv_blocks_total,
                      .kv_blocks_used = stats.kv_blocks_used,
                      .kv_blocks_free = stats.kv_blocks_free,
                      .kv_blocks_cached = stats.kv_blocks_cached,
                      .kv_swa_blocks_total = stats.kv_swa_blocks_total,
                      .kv_swa_blocks_used = stats.kv_swa_blocks_used,
                      .kv_swa_blocks_free = stats.kv_swa_blocks_free,
                      .kv_swa_blocks_cached = stats.kv_swa_blocks_cached,
                      .kv_swa_blocks_per_seq_max = stats.kv_swa_blocks_per_seq_max,
                      .prefix_cache_queried_tokens = stats.prefix_queried_tokens,
                      .prefix_cache_hit_tokens = stats.prefix_hit_tokens});
}

void Engine::Impl::shutdown() {
  while (!seqs.empty()) {
    Sequence* s = seqs.back().get();
    s->finish(FinishReason::Cancelled);
    retire(s);
  }
  while (!kept.empty()) release_session(kept.begin()->first);
  std::deque<GenerationJob> left;
  {
    std::lock_guard lock(mu);
    left.swap(inbox);
  }
  for (GenerationJob& job : left) finish_unrun(job, FinishReason::Cancelled);
  for (GenerationJob& job : waiting_trie) finish_unrun(job, FinishReason::Cancelled);
  waiting_trie.clear();
  if (trie_build.valid()) trie_build.wait();  // the worker uses tok and mu
  publish();
}

Engine::Engine(const LlamaModel& model, const Tokenizer& tokenizer, EngineOptions opts)
    : model_(model), tokenizer_(tokenizer) {
  if (opts.max_queue < 1) throw Error("engine: max_queue must be at least 1");
  if (tokenizer.n_vocab() > model.config().n_vocab)
    throw Error("engine: the tokenizer has " + std::to_string(tokenizer.n_vocab()) +
                " tokens but the model only " + std::to_string(model.config().n_vocab));
  const int32_t train = model.config().n_ctx_train;
  if (opts.n_ctx < 0 || opts.n_ctx > train)
    throw Error("engine: context " + std::to_string(opts.n_ctx) + " is outside [1, " + std::to_string(train) +
                "] (the model's training context)");
  const int32_t ctx = opts.n_ctx > 0 ? opts.n_ctx : train;
  if (opts.spec.ngram < 1 || opts.spec.k < 1 || opts.spec.max_seqs < 0)
    throw Error("engine: speculative decoding needs ngram >= 1, k >= 1 and max_seqs >= 0");
  if (opts.spec.draft_model && opts.spec.draft_model->config().n_vocab != model.config().n_vocab)
    throw Error("engine: the draft model's vocabulary has " + std::to_string(opts.spec.draft_model->config().n_vocab) +
                " tokens, the model's " + std::to_string(model.config().n_vocab));
  impl_ = std::make_unique<Impl>(model, tokenizer, opts, ctx);
  if (impl_->n_ctx < 2)
    throw Error("engine: the KV pool holds only " + std::to_string(impl_->n_ctx) + " token(s); raise kv_memory");
  impl_->publish();
  impl_->thread = std::thread([impl = impl_.get()] { impl->loop(); });
}

Engine::~Engine() {
  {
    std::lock_guard lock(impl_->mu);
    impl_->stopping = true;
    for (const auto& h : impl_->live) h->cancel();
  }
  impl_->cv.notify_all();
  impl_->thread.join();
}

std::shared_ptr<RequestHandle> Engine::submit(GenerationRequest req, EventCallback on_event) {
  auto handle = std::make_shared<RequestHandle>();
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->stopping || impl_->unadmitted >= impl_->max_queue) return nullptr;
    ++impl_->unadmitted;
    impl_->live.push_back(handle);
    impl_->inbox.push_back(GenerationJob{std::move(req), std::move(on_event), handle, Clock::now()});
  }
  impl_->cv.notify_one();
  return handle;
}

int32_t Engine::n_ctx() const { return impl_->n_ctx; }

void Engine::end_session(uint64_t session) {
  {
    std::lock_guard lock(impl_->mu);
    impl_->ending.push_back(session);
  }
  impl_->cv.notify_one();
}

const EngineMetrics& Engine::metrics() const { return impl_->metrics; }

EngineStats Engine::stats() const {
  std::lock_guard lock(impl_->mu);
  return impl_->stats;
}

}  // namespace nexus
