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
//   - Not aligned, after each output token from the third on: with m = 3,
//     the tracker looks for the first j with P[j - m, j) equal to the last m
//     output tokens and j - m >= i (i: the position where the alignment
//     last ended, so the search only moves forward through P). Found, those
//     m tokens count as matched, less any of them already counted (an output
//     token counts once), and the tracker is aligned at P[j]. (With m = 1 at
//     the first token, a prediction whose first token differs -- an edit at
//     the top of a file, a leading space -- realigned at the first later
//     copy of the output's first token and never came back: 27 of 40
//     matching tokens counted.)
//   - accepted_prediction_tokens = tokens matched; rejected = |P| - accepted.
// The proposal follows an edit-distance alignment of the output with P,
// whatever the counts say, so that an edit costs one verify step instead of
// kResync plain ones before the rule realigns, and a run of one repeated
// token (common in code and in small models' output), where several
// alignments fit equally well, does not lose the right one:
//   - D[j] is the least number of edits (a token of P replaced or skipped, a
//     token inserted) that turns P[0, j) into the output so far, kept for j
//     within kBand of the best position (Levenshtein's distance, updated by
//     one row per output token: Wagner and Fischer, 1974);
//   - a replaced token costs 2, a skipped or inserted one 3: where both fit
//     (a changed token inside a run of one repeated token, where skipping
//     it also matches), the alignment keeps to the diagonal;
//   - the proposal starts at the best position: the least D[j]; among equals
//     the nearest one reached by matching the newest token, else the
//     farthest (a token of P replaced rather than one inserted); when the
//     rule realigns past the band (a large part of P skipped), the
//     alignment restarts there;
//   - it is made only while the newest token or the one before it matched
//     P there, so a prediction that does not fit (garbage) stops proposing
//     after two tokens and the other proposers (draft model, n-gram) step in.
// The alignment changes only what is proposed (every proposal is verified),
// never the counts. Whether the tokens were proposed (speculation may be off
// for the step) does not change the counts either.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace nexus::spec {

class PredictionTracker {
 public:
  static constexpr int32_t kResync = 3;       // m's upper bound in the rule above
  static constexpr size_t kBand = 64;          // positions kept on either side of the best

  explicit PredictionTracker(std::vector<int32_t> prediction);

  // The output's newest token; `output`: every output token so far, that
  // one included (its last element).
  void on_token(std::span<const int32_t> output);
  // Appends to `out` (cleared first) up to k tokens of the prediction, from
  // the best position of the alignment (above). Returns out.size().
  int32_t propose(int32_t k, std::vector<int32_t>& out) const;

  int32_t size() const { return static_cast<int32_t>(p_.size()); }
  int32_t accepted() const { return accepted_; }
  int32_t rejected() const { return size() - accepted_; }
  bool aligned() const { return aligned_; }

 private:
  std::vector<int32_t> p_;
  // One row of the alignment for output token `id`.
  void align(int32_t id);
  // Restarts the alignment at P[j], at the current best cost.
  void restart_at(size_t j);

  size_t pos_ = 0;  // aligned: the next token expected; not: where the search starts
  // The alignment: d_[j] for j in [lo_, hi_] (others: unreachable).
  std::vector<int32_t> d_, nd_;
  size_t lo_ = 0, hi_ = 0, best_ = 0;
  // The newest output token, and the one before it, matched P at the best
  // position (before any output: both).
  bool last_matched_ = true, prev_matched_ = true;
  int32_t accepted_ = 0;
  size_t counted_ = 0;  // output tokens up to the last one counted as matched
  bool aligned_ = true;
};

}  // namespace nexus::spec
