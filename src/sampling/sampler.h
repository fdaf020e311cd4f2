// Sampler: picks the next token from a row of logits.
//
// The chain follows llama.cpp's default order (common/sampling.cpp):
//   0. logit_bias: bias added to the named tokens' logits.
//   1. penalties over the last repeat_last_n tokens of the history
//      (prompt + generated so far):
//        repeat_penalty (CTRL, Keskar et al. 2019): logit > 0 ? logit / p : logit * p
//        frequency / presence (OpenAI): logit -= count * freq + (count > 0) * presence
//      repeat_last_n = -1 looks at the whole history, 0 disables the penalties.
//   2. temperature <= 0: argmax (ties go to the lowest id) — deterministic, O(n_vocab).
//   3. otherwise top_k, top_p (nucleus, Holtzman et al. 2019; probabilities of
//      the untempered logits that survived top_k, as llama.cpp does), min_p
//      (keep p >= min_p * p_max), temperature, softmax, one weighted draw.
//
// Randomness: std::mt19937_64 seeded with SamplingParams::seed, or when it is
// absent with a fresh seed (std::random_device read once per process, then
// SplitMix64 per sampler; seed() reports which seed was used).
// The draw turns 53 random bits into a double itself rather than using
// std::uniform_real_distribution, whose output differs between standard
// libraries, and the filters order their survivors themselves: the same
// seed, logits and history give the same token with any standard library.
//
// Cost per token, n = n_vocab: the penalties touch only the window; greedy
// is two vectorized passes; top_k selects the k best with a k-sized heap while
// reading the logits (no n-sized candidate list); top_p finds the nucleus in
// two passes over a histogram of the candidates' logits (O(n), sorting only
// the bin where the mass reaches p: the draw needs the set, not its order); min_p is one pass; softmax uses the vectorized exp of
// kernels/fast_exp.h (relative error < 1e-6); the draw finds its candidate
// by skipping blocks of 64 weights by their sums. With no filter that can
// drop a candidate (top_k 0, top_p 1, min_p 0: temperature alone) the draw
// reads the logits directly, with no n-sized candidate list. Building a
// Sampler allocates nothing vocabulary-sized (that waits for the first
// penalty or top_p cut). One Sampler per sequence:
// samplers of different sequences may run on different threads at once.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "sampling/sampling_params.h"

namespace nexus {

class Sampler {
 public:
  // Throws nexus::Error when a parameter is out of range (see validate) or
  // n_vocab is not positive.
  Sampler(const SamplingParams& params, int32_t n_vocab);

  // Throws nexus::Error naming the first bad field: temperature, top_p,
  // min_p, penalties must be finite; temperature >= 0; top_k >= 0;
  // top_p and min_p in [0, 1]; repeat_penalty > 0; repeat_last_n >= -1;
  // logit_bias values in [-100, 100]; logprobs in [-1, kMaxTopLogprobs].
  // The constructor also refuses logit_bias ids outside [0, n_vocab).
  static void validate(const SamplingParams& params);

  // logits: [n_vocab], modified in place by logit_bias and the penalties.
  // history: prompt + generated tokens; ids outside [0, n_vocab) are ignored.
  // Returns a token id in [0, n_vocab). Throws nexus::Error when
  // logits.size() != n_vocab.
  int32_t sample(std::span<float> logits, std::span<const int32_t> history);

  // The same choice for logits that must stay as they are: they are copied
  // into `scratch` only when logit_bias or a penalty applies (greedy and the
  // samplers read them in place), which spares a copy of n_vocab floats per
  // token. The logits the choice was made from are then `scratch` when
  // edits_logits(), else `logits`.
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history, std::vector<float>& scratch);

  // True when logit_bias or the repeat/frequency/presence penalties change the logits.
  bool edits_logits() const;

  uint64_t seed() const { return seed_; }
  const SamplingParams& params() const { return params_; }

 private:
  struct Candidate {
    float logit;
    int32_t id;
  };

  void apply_penalties(std::span<float> logits, std::span<const int32_t> history);
  int32_t choose(std::span<const float> logits);  // after the penalties
  void gather(std::span<const float> logits);  // fills cands_, applying top_k
  void top_p(float p);
  void min_p(float p);
  int32_t draw(float temperature);                                       // over cands_
  int32_t draw_all(std::span<const float> logits, float temperature);    // over every id, no filter
  template <class IdOf>
  int32_t draw_weights(float temperature, IdOf id_of);  // weights_ holds the logits; id_of(i) = candidate i's id
  double uniform01();  // [0, 1), 53 bits

  SamplingParams params_;
  int32_t n_vocab_;
  uint64_t seed_;
  std::mt19937_64 rng_;
  std::vector<int32_t> counts_;      // [n_vocab] once penalties run (empty before), zero between calls
  std::vector<Candidate> cands_;     // survivors of the filters
  std::vector<float> weights_;       // exp scratch
  std::vector<float> weight_by_id_;  // [n_vocab] once top_p cuts a bin (empty before), scratch: e^(logit - max) of the cut bin's candidates
  std::vector<uint16_t> bins_;       // top_p scratch: each candidate's bin
  std::vector<uint64_t> keys_;       // top_p scratch: the cut bin's candidates as sortable keys
};

}  // namespace nexus
