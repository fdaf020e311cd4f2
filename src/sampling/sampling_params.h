// SamplingParams: how the next token is chosen from the logits, and when a
// generation stops. Field meanings follow OpenAI's API reference
// (temperature, top_p, frequency_penalty, presence_penalty, seed, stop,
// max_tokens) and llama.cpp's sampler (top_k, min_p, repeat_penalty).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace nexus {

struct SamplingParams {
  float temperature = 1.0f;       // 0 = greedy (argmax)
  int32_t top_k = 0;              // 0 = off
  float top_p = 1.0f;             // 1 = off
  float min_p = 0.0f;             // 0 = off; keeps p >= min_p * p_max
  float repeat_penalty = 1.0f;    // 1 = off; CTRL-style, over the last repeat_last_n tokens
  int32_t repeat_last_n = 64;     // tokens (prompt and output) the penalties look at
  float frequency_penalty = 0.0f; // OpenAI: logit -= count * frequency_penalty
  float presence_penalty = 0.0f;  // OpenAI: logit -= (count > 0) * presence_penalty
  std::optional<uint64_t> seed;   // same seed + same request = same output
  // OpenAI logit_bias: (token id, bias) pairs added to the logits before
  // everything else (llama.cpp's chain order); bias in [-100, 100] (-100
  // bans the token in practice, +100 all but forces it); ids in the vocabulary.
  std::vector<std::pair<int32_t, float>> logit_bias;
  // Log-probabilities reported with each sampled token: -1 = none; k >= 0 =
  // the chosen token's and the k most likely tokens' (k <= kMaxTopLogprobs),
  // from the logits after logit_bias and the penalties, before temperature
  // and the filters (what the model, as adjusted by the request, predicts;
  // vLLM's default reading of OpenAI's field).
  int32_t logprobs = -1;
};

constexpr int32_t kMaxTopLogprobs = 20;  // OpenAI's chat limit for top_logprobs

struct StopParams {
  int32_t max_tokens = 256;        // generated tokens, at most; 0: none (the prompt only,
                                   // for GenerationRequest::prompt_logprobs)
  std::vector<std::string> stop;   // stop strings; never part of the output
  bool ignore_eos = false;         // keep going past end-of-generation tokens
};

}  // namespace nexus
