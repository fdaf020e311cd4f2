// OpenAI's `n`: one request, n choices, each its own generation of the same
// prompt.
//
// Seeds: choice i of a request with seed s samples with seed s + i (mod
// 2^64), so choice 0 is the request's single answer and choice i equals a
// request with n = 1 and seed s + i. Without a seed every choice draws a
// fresh one (sampler.h).
//
// KV sharing: the server submits choice 0 first and choices 1..n-1 once
// choice 0's first event arrives, when its prompt's full blocks are
// committed to the prefix cache (engine/block_manager.h): the later choices
// take references on those blocks and prefill only the prompt's last,
// partial block. usage.prompt_tokens_details.cached_tokens stays choice 0's.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/engine.h"

namespace nexus::server {

inline constexpr int32_t kMaxChoices = 16;  // n above this: 400 naming `n`

// The seed of choice `index` for a request seeded with `seed`.
inline uint64_t choice_seed(uint64_t seed, int32_t index) { return seed + static_cast<uint64_t>(index); }

// Choices 1..n-1 of `first` (choice 0, left as is): copies with their seeds.
inline std::vector<GenerationRequest> more_choices(const GenerationRequest& first, int32_t n) {
  std::vector<GenerationRequest> out;
  for (int32_t i = 1; i < n; ++i) {
    GenerationRequest r = first;
    if (r.sampling.seed) r.sampling.seed = choice_seed(*r.sampling.seed, i);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace nexus::server
