// Engine: owns the model and runs generations on its own thread.
//
// This version serves one sequence at a time from a FIFO queue (continuous
// batching replaces it later behind the same interface). I/O threads call
// submit() and cancel(); the engine thread tokenizes nothing and blocks on
// nothing but its queue: it prefills, decodes token by token and reports each
// step through the request's callback. Between requests the KV cache keeps
// the last sequence: a prompt that shares a prefix with it (a chat turn that
// extends the previous one) evaluates only the tokens after that prefix.
//
// Threading contract:
//   - submit()/RequestHandle::cancel() are thread-safe and never block on a
//     running generation.
//   - on_event runs on the engine thread. It must not block (copy the event
//     and post it to your own executor); a slow consumer must never stall the
//     engine.
//   - Cancellation is checked before every decode step: a cancelled request
//     stops within one token and gets a final event with FinishReason::Cancelled.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sampling/sampling_params.h"

namespace nexus {

class Tokenizer;
class LlamaModel;
class EngineMetrics;

enum class FinishReason { Stop, Length, Cancelled, Error };
const char* finish_reason_name(FinishReason r);  // "stop", "length", "cancelled", "error"

struct GenerationRequest {
  std::vector<int32_t> prompt;  // token ids, BOS included if wanted; 1 <= size < n_ctx
  SamplingParams sampling;
  StopParams stop;
};

struct Usage {
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
};

struct Timings {
  double queue_s = 0;      // submit -> prefill start (seconds)
  double prefill_s = 0;    // prompt processing (seconds)
  double ttft_s = 0;       // submit -> first token sampled (seconds)
  double decode_s = 0;     // first token -> last token (seconds)
};

// One event per generated step: `text` is the newly finished text (valid UTF-8,
// stop strings withheld, possibly empty). The last event has done = true,
// a finish reason, usage and timings; it may carry text too.
struct GenerationEvent {
  std::string text;
  int32_t token = -1;           // the sampled token, -1 on the final event if none
  bool done = false;
  FinishReason finish = FinishReason::Stop;
  std::string error;            // set when finish == Error
  Usage usage;
  Timings timings;
};

using EventCallback = std::function<void(const GenerationEvent&)>;

class RequestHandle {
 public:
  void cancel() { cancelled_.store(true, std::memory_order_relaxed); }
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }

 private:
  std::atomic<bool> cancelled_{false};
};

struct EngineOptions {
  int32_t n_threads = 0;       // worker threads for the kernels; 0 = hardware concurrency
  int32_t max_queue = 64;      // waiting requests; submit() refuses more
  int32_t n_ctx = 0;           // context size (tokens); 0 = the model's n_ctx_train
};

class Engine {
 public:
  // Takes the model and tokenizer (which must outlive the engine) and starts
  // the engine thread.
  Engine(const LlamaModel& model, const Tokenizer& tokenizer, EngineOptions opts = {});
  ~Engine();  // cancels everything and joins the thread
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a generation. Returns nullptr when the queue is full. Invalid
  // requests (empty prompt, prompt + 1 > n_ctx, token ids out of range) are
  // reported through a single final event with FinishReason::Error.
  std::shared_ptr<RequestHandle> submit(GenerationRequest req, EventCallback on_event);

  const Tokenizer& tokenizer() const { return tokenizer_; }
  const LlamaModel& model() const { return model_; }
  int32_t n_ctx() const;
  // Prometheus metrics (engine/engine_metrics.h); render() is safe from any thread.
  const EngineMetrics& metrics() const;

 private:
  struct Impl;
  const LlamaModel& model_;
  const Tokenizer& tokenizer_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nexus
