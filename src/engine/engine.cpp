// Engine: an inbox (mutex + condition variable) in front of one engine thread
// that owns the KV cache, the scheduler and the batched forward pass, and
// runs steps while any sequence is running or waiting.
#include "engine/engine.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "engine/block_manager.h"
#include "engine/engine_metrics.h"
#include "engine/kv_pool_sizes.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
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
  return std::make_shared<grammar::VocabTrie>(pieces);
}

GenerationEvent final_event(const GenerationJob& job, FinishReason reason, const std::string& error) {
  GenerationEvent ev;
  ev.done = true;
  ev.finish = reason;
  ev.error = error;
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
        n_ctx(std::min(ctx, cache.n_blocks() * cache.block_size())) {
    sched.set_reclaim([this] { return release_oldest_session(); });
  }

  void loop();
  void accept(GenerationJob job);
  void reap_cancelled();
  void step();
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
  std::vector<std::unique_ptr<Sequence>> seqs;
  std::vector<SeqRun> runs;
  struct Sampled {  // a sequence whose run completed in this step
    Sequence* seq;
    std::span<const float> logits;  // its row, [n_vocab]
    int32_t id = -1;                // the sampled token
    std::string error;              // why sampling failed, or empty
  };
  std::vector<Sampled> sampled;
  uint64_t n_arrived = 0;
  // The vocabulary as a trie for grammar masks: built at the first request
  // with a grammar (tens of ms for a 150k vocabulary), then shared.
  std::shared_ptr<const grammar::VocabTrie> vocab_trie;
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
  EngineStats stats;                                    // guarded by mu
  std::thread thread;
};

void Engine::Impl::loop() {
  for (;;) {
    std::deque<GenerationJob> arrived;
    {
      std::unique_lock lock(mu);
      if (seqs.empty()) cv.wait(lock, [&] { return stopping || !inbox.empty() || !ending.empty(); });
      if (stopping) break;
      arrived.swap(inbox);
    }
    end_sessions();
    for (GenerationJob& job : arrived) accept(std::move(job));
    reap_cancelled();
    if (!seqs.empty()) step();
    publish();
  }
  shutdown();
}

void Engine::Impl::accept(GenerationJob job) {
  std::unique_ptr<Sequence> seq;
  try {
    validate_request(job.req, n_ctx, n_vocab);
    if (job.req.grammar && !vocab_trie) vocab_trie = grammar_vocab(tok, n_vocab);
    // (A grammar too large to follow is refused here, by the matcher.)
    seq = std::make_unique<Sequence>(job, tok, n_vocab, n_arrived + 1, &metrics,
                                     job.req.grammar ? vocab_trie : nullptr);
    ++n_arrived;
  } catch (const std::exception& e) {
    const GenerationEvent ev = final_event(job, FinishReason::Error, e.what());
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

void Engine::Impl::step() {
  StepPlan plan = sched.plan();
  const Clock::time_point start = Clock::now();
  for (SchedSeq* s : plan.admitted) static_cast<Sequence*>(s)->on_admitted(start);
  if (!plan.admitted.empty()) leave_queue(static_cast<int32_t>(plan.admitted.size()));
  for (size_t i = 0; i < plan.preempted.size(); ++i) metrics.add_preemption();
  if (plan.runs.empty()) return;
  runs.clear();
  for (const ScheduledRun& r : plan.runs) {
    SeqRun& run = runs.emplace_back();
    run.tokens = std::span<const int32_t>(r.seq->tokens.data() + r.n_past, static_cast<size_t>(r.n_tokens));
    run.n_past = r.n_past;
    run.block_table = blocks.block_table(r.seq->kv);
    run.swa_block_table = blocks.swa_block_table(r.seq->kv);
    run.want_logits = r.completes;
    const auto* seq = static_cast<const Sequence*>(r.seq);
    run.all_logits = seq->wants_prompt_logprobs() && r.n_past < seq->prompt_size();
  }
  std::span<const float> logits;
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
  sched.complete(plan);
  const Clock::time_point now = Clock::now();
  metrics.observe_step(std::chrono::duration<double>(now - start).count(), plan.n_tokens,
                       static_cast<int32_t>(plan.runs.size()));
  sampled.clear();
  std::vector<Sequence*> at_prompt_end;  // max_tokens 0: done, nothing to sample
  size_t row = 0;
  const auto nv = static_cast<size_t>(n_vocab);
  for (size_t i = 0; i < plan.runs.size(); ++i) {
    const ScheduledRun& r = plan.runs[i];
    auto* s = static_cast<Sequence*>(r.seq);
    if (runs[i].all_logits) {
      const auto n = static_cast<size_t>(r.n_tokens);
      s->on_prompt_logits(r.n_past, logits.subspan(row * nv, n * nv), n_vocab);
      row += n;
      if (r.completes) --row;  // the run's last row is also its sampling row
    }
    if (!r.completes) continue;
    const std::span<const float> last = logits.subspan(row++ * nv, nv);
    if (s->ends_at_prompt()) at_prompt_end.push_back(s);
    else sampled.push_back(Sampled{s, last, -1, {}});
  }
  // Sampling touches only each sequence's own sampler, so rows are sampled
  // on the kernel threads (a 32000-logit top_p row costs tens of us); the
  // events then go out in order on this thread.
  auto sample_rows = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      Sampled& x = sampled[static_cast<size_t>(i)];
      try {
        x.id = x.seq->sample(x.logits);
      } catch (const std::exception& e) {
        x.error = e.what();
      }
    }
  };
  if (sampled.size() > 1) forward.pool().parallel_for_stealing(static_cast<int64_t>(sampled.size()), 1, sample_rows);
  else sample_rows(0, static_cast<int64_t>(sampled.size()));
  for (Sampled& x : sampled) {
    bool done = true;
    if (!x.error.empty()) {
      x.seq->fail(x.error);
    } else {
      try {
        done = x.seq->on_token(x.id, n_ctx, now);
      } catch (const std::exception& e) {
        x.seq->fail(e.what());
      } catch (...) {
        x.seq->fail("unknown error during generation");
      }
    }
    if (done) retire(x.seq);
  }
  for (Sequence* s : at_prompt_end) {
    s->finish(FinishReason::Length);
    retire(s);
  }
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
