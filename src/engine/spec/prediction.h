// Predicted Outputs (OpenAI's `prediction: {"type": "content", ...}`): the
// client sends text it expects most of the answer to repeat (a file being
// edited); its tokens are proposed for speculative decoding where they line
// up with the output, and usage reports how many of them the output used.
//
// Alignment rule (deterministic, a function of the prediction P and the
// output tokens alone, so a client can recompute the usage counts):
//   - The tracker starts aligned at P[0].
//   - Aligned at P[i], an output token equal to P[i] is matched (accepted)
//     and the tracker moves to P[i + 1]; any other token ends the alignment
//     (so does running past the end of P).
//   - Not aligned, after each output token: with m = min(3, output length),
//     the tracker looks for the first j with P[j - m, j) equal to the last m
//     output tokens and j - m >= i (i: the position where the alignment
//     last ended, so the search only moves forward through P). Found, those
//     m tokens count as matched and the tracker is aligned at P[j].
//   - accepted_prediction_tokens = tokens matched; rejected = |P| - accepted.
// The proposal, while aligned at P[i], is P[i, i + k); none otherwise.
// Whether the tokens were proposed (speculation may be off for the step) does
// not change the counts.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace nexus::spec {

class PredictionTracker {
 public:
  static constexpr int32_t kResync = 3;  // m's upper bound in the rule above

  explicit PredictionTracker(std::vector<int32_t> prediction) : p_(std::move(prediction)) {}

  // The output's newest token; `output`: every output token so far, that
  // one included (its last element).
  void on_token(std::span<const int32_t> output);
  // Appends to `out` (cleared first) up to k tokens of the prediction (none
  // when not aligned). Returns out.size().
  int32_t propose(int32_t k, std::vector<int32_t>& out) const;

  int32_t size() const { return static_cast<int32_t>(p_.size()); }
  int32_t accepted() const { return accepted_; }
  int32_t rejected() const { return size() - accepted_; }
  bool aligned() const { return aligned_; }

 private:
  std::vector<int32_t> p_;
  size_t pos_ = 0;  // aligned: the next token expected; not: where the search starts
  int32_t accepted_ = 0;
  bool aligned_ = true;
};

}  // namespace nexus::spec
