// One generation, start to finish, on the calling (engine) thread: validate
// the request, prefill the prompt (reusing the KV cache's common prefix with
// the previous sequence), then decode token by token:
//   sample -> StreamDecoder (whole UTF-8 characters) -> StopMatcher -> event
// until an end-of-generation token (unless ignore_eos), max_tokens, a stop
// string, a full context ("length") or cancellation. Internal to the engine.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/engine.h"

namespace nexus {

class LlamaContext;
class EngineMetrics;

struct GenerationJob {
  GenerationRequest req;
  EventCallback on_event;
  std::shared_ptr<RequestHandle> handle;
  std::chrono::steady_clock::time_point submitted;
};

// The context and the tokens its KV cache holds (cached.size() == n_past).
struct SequenceState {
  LlamaContext& ctx;
  int32_t n_vocab = 0;  // the model's (logits per row)
  std::vector<int32_t> cached;
  EngineMetrics* metrics = nullptr;  // observed per step, token and request when set
};

// Delivers exactly one final event (done = true) to job.on_event, whatever
// happens; never throws. Exceptions from on_event end the generation.
void run_generation(SequenceState& seq, const Tokenizer& tok, GenerationJob& job);

// A final event with no token, for jobs that never run (engine shutdown).
void finish_unrun(GenerationJob& job, FinishReason reason, const std::string& error = {});

}  // namespace nexus
