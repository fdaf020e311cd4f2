// Engine: a FIFO queue (mutex + condition variable) in front of one engine
// thread that owns the LlamaContext and runs one generation at a time.
#include "engine/engine.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "engine/engine_metrics.h"
#include "engine/generation.h"
#include "model/llama_context.h"
#include "model/llama_model.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace nexus {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Cancelled: return "cancelled";
    case FinishReason::Error: return "error";
  }
  return "error";
}

struct Engine::Impl {
  Impl(const LlamaModel& model, const Tokenizer& tok, const EngineOptions& opts)
      : tok(tok), max_queue(opts.max_queue), ctx(model, opts.n_ctx, opts.n_threads),
        seq{ctx, model.config().n_vocab, {}, &metrics} {}

  void loop();

  const Tokenizer& tok;
  const int32_t max_queue;
  EngineMetrics metrics;
  LlamaContext ctx;     // used by the engine thread only (after construction)
  SequenceState seq;    // likewise

  std::mutex mu;
  std::condition_variable cv;
  std::deque<GenerationJob> queue;          // guarded by mu
  std::shared_ptr<RequestHandle> running;   // guarded by mu
  bool stopping = false;                    // guarded by mu
  std::thread thread;
};

void Engine::Impl::loop() {
  for (;;) {
    GenerationJob job;
    {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return stopping || !queue.empty(); });
      if (stopping) break;
      job = std::move(queue.front());
      queue.pop_front();
      running = job.handle;
      metrics.set_gauges({.running_sequences = 1, .waiting_requests = static_cast<int32_t>(queue.size())});
    }
    run_generation(seq, tok, job);  // invokes callbacks without holding mu
    std::lock_guard lock(mu);
    running.reset();
    metrics.set_gauges({.running_sequences = 0, .waiting_requests = static_cast<int32_t>(queue.size())});
  }
  // Shutdown: whatever is still queued gets its final event.
  std::deque<GenerationJob> left;
  {
    std::lock_guard lock(mu);
    left.swap(queue);
  }
  for (GenerationJob& job : left) finish_unrun(job, FinishReason::Cancelled);
}

Engine::Engine(const LlamaModel& model, const Tokenizer& tokenizer, EngineOptions opts)
    : model_(model), tokenizer_(tokenizer) {
  if (opts.max_queue < 1) throw Error("engine: max_queue must be at least 1");
  if (tokenizer.n_vocab() > model.config().n_vocab)
    throw Error("engine: the tokenizer has " + std::to_string(tokenizer.n_vocab()) +
                " tokens but the model only " + std::to_string(model.config().n_vocab));
  impl_ = std::make_unique<Impl>(model, tokenizer, opts);
  impl_->thread = std::thread([impl = impl_.get()] { impl->loop(); });
}

Engine::~Engine() {
  {
    std::lock_guard lock(impl_->mu);
    impl_->stopping = true;
    if (impl_->running) impl_->running->cancel();
    for (GenerationJob& job : impl_->queue)
      if (job.handle) job.handle->cancel();
  }
  impl_->cv.notify_all();
  impl_->thread.join();
}

std::shared_ptr<RequestHandle> Engine::submit(GenerationRequest req, EventCallback on_event) {
  auto handle = std::make_shared<RequestHandle>();
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->stopping || static_cast<int32_t>(impl_->queue.size()) >= impl_->max_queue) return nullptr;
    impl_->queue.push_back(
        GenerationJob{std::move(req), std::move(on_event), handle, std::chrono::steady_clock::now()});
    impl_->metrics.set_gauges({.running_sequences = impl_->running ? 1 : 0,
                               .waiting_requests = static_cast<int32_t>(impl_->queue.size())});
  }
  impl_->cv.notify_one();
  return handle;
}

int32_t Engine::n_ctx() const { return impl_->ctx.n_ctx(); }

const EngineMetrics& Engine::metrics() const { return impl_->metrics; }

}  // namespace nexus
