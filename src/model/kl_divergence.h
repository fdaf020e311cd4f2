// How far a model's next-token distributions are from a base model's over the
// scored positions of a perplexity run (model/perplexity.h): the measures
// llama-perplexity's --kl-divergence reports (tools/perplexity/perplexity.cpp),
// plus the RMS difference of the raw logits. At each scored position, with
// p = softmax(base logits), q = softmax(model logits) and t the text's next token:
//   KLD       = sum_i p_i (log p_i - log q_i)      (KL(base || model), nats)
//   same top  = argmax q == argmax p               (first index on ties)
//   Δp        = q_t - p_t                          (probability of the text's token)
//   Δlogit^2  = mean_i (z_model,i - z_base,i)^2    (over the vocabulary)
// Every mean comes with its standard error (MeanAccumulator::mean); RMS
// values carry it as 0.5 / rms * stderr(mean square), the share of same top
// as sqrt(s (1 - s) / (N - 1)), as llama.cpp does. llama.cpp computes the
// base's side from log-probabilities stored as 16-bit integers and skips
// base log-probabilities below -16 in the KLD sum; here both sides are exact
// doubles, so the two tools agree to about 1e-4 relative, not bit for bit.
#pragma once

#include <cstdint>
#include <span>

#include "model/perplexity.h"

namespace nexus {

struct KlDivergenceStats {
  MeanAccumulator nll, nll_base;  // -log q_t, -log p_t
  double sum_nll_nll_base = 0;    // for the covariance of the two mean NLLs
  MeanAccumulator kld;
  double max_kld = 0;
  MeanAccumulator p_diff;         // Δp
  MeanAccumulator p_diff_sq;      // Δp^2
  double max_abs_p_diff = 0;
  MeanAccumulator logit_diff_sq;  // per position: mean over the vocabulary of Δlogit^2
  int64_t n_same_top = 0;

  // Adds one scored position: the model's and the base's logits ([n_vocab]
  // each, the same n_vocab) and the text's next token. Throws nexus::Error
  // when the sizes differ or the token is outside them.
  void add(std::span<const float> logits, std::span<const float> base_logits, int32_t next_token);

  int64_t count() const { return kld.count; }
  Estimate ppl() const { return perplexity_of(nll); }
  Estimate ppl_base() const { return perplexity_of(nll_base); }
  // ln(PPL / PPL(base)) = mean NLL - mean NLL(base), its error reduced by
  // their covariance (the same text: the two are strongly correlated).
  Estimate log_ppl_ratio() const;
  // Correlation of the per-token NLLs of the two models (0 when undefined).
  double nll_correlation() const;
  Estimate mean_kld() const { return kld.mean(); }
  Estimate same_top() const;        // share in [0, 1]
  Estimate rms_p_diff() const;      // probability (0..1)
  Estimate rms_logit_diff() const;  // logit units
};

}  // namespace nexus
