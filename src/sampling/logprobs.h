// Log-probabilities of tokens under a row of logits (OpenAI's `logprobs` /
// `top_logprobs`): log_softmax(logits)[id] = logit[id] - max - log(sum_j
// e^(logit[j] - max)), the sum in float64. NaN logits count as -inf (the
// sampler never draws them), so their log-probability is -inf.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace nexus {

struct LogprobEntry {
  int32_t id = -1;
  float logprob = 0.0f;  // natural log, <= 0
};

struct Logprobs {
  LogprobEntry chosen;
  std::vector<LogprobEntry> top;  // the k most likely, best first (ties: lower id first)
};

// logits: [n_vocab] (non-empty); chosen in [0, n_vocab); 0 <= k (k > n_vocab
// gives n_vocab entries). Two passes over the logits, plus a k-sized
// selection when k > 0.
Logprobs token_logprobs(std::span<const float> logits, int32_t chosen, int32_t k);

}  // namespace nexus
