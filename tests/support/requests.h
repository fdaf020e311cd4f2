// Request builders shared by the engine tests.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "engine/engine.h"

namespace nexus::test {

// Greedy (temperature 0) with ignore_eos, so every request generates exactly
// `max_tokens` and concurrent sequences overlap for as many steps as asked.
inline GenerationRequest greedy(std::vector<int32_t> prompt, int32_t max_tokens,
                                int32_t priority = kPriorityDefault) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.sampling.temperature = 0;
  r.stop.max_tokens = max_tokens;
  r.stop.ignore_eos = true;
  r.priority = priority;
  return r;
}

}  // namespace nexus::test
