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
// The proposal, while aligned at P[i], is P[i, i + k). While not aligned it
// follows a guess of where the output went on in P, so that an edit costs
// one verify step instead of kResync plain ones before the rule realigns:
//   - when the alignment ends at P[i] on a token t, the guess is the
//     position after the first t in P[i, i + kGuessWindow) (t was P's, and
//     output skipped to it), else i + 1 (t replaced P[i]);
//   - each further output token t: the guess moves one on when it is P's
//     token there, else to after the first t in P[i, guess + kGuessWindow),
//     else one on;
//   - the proposal is P[guess, guess + k), but only while the last output
//     token backed the guess (the alignment just ended, t was P's token at
//     the guess, or t was found): after a token found nowhere near, nothing
//     is proposed from P, so a prediction that does not fit (garbage) stops
//     proposing at once and the other proposers (draft model, n-gram) step in.
// Guesses change only what is proposed (every proposal is verified), never
// the counts. Whether the tokens were proposed (speculation may be off for
// the step) does not change the counts either.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace nexus::spec {

class PredictionTracker {
 public:
  static constexpr int32_t kResync = 3;       // m's upper bound in the rule above
  static constexpr size_t kGuessWindow = 8;    // how far past the guess a token is looked for

  explicit PredictionTracker(std::vector<int32_t> prediction) : p_(std::move(prediction)) {}

  // The output's newest token; `output`: every output token so far, that
  // one included (its last element).
  void on_token(std::span<const int32_t> output);
  // Appends to `out` (cleared first) up to k tokens of the prediction: from
  // the alignment, else from the guess (above). Returns out.size().
  int32_t propose(int32_t k, std::vector<int32_t>& out) const;

  int32_t size() const { return static_cast<int32_t>(p_.size()); }
  int32_t accepted() const { return accepted_; }
  int32_t rejected() const { return size() - accepted_; }
  bool aligned() const { return aligned_; }

 private:
  // The first j in [from, min(to, |P|)) with P[j] == id, or |P|.
  size_t find(int32_t id, size_t from, size_t to) const;

  std::vector<int32_t> p_;
  size_t pos_ = 0;  // aligned: the next token expected; not: where the search starts
  size_t guess_ = 0;  // not aligned: where the output is guessed to go on in P
  bool guess_live_ = false;  // the last output token backed the guess
  int32_t accepted_ = 0;
  bool aligned_ = true;
};

}  // namespace nexus::spec
