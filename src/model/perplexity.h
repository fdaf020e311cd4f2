// Perplexity of a model over a text (`nexus perplexity`), computed the way
// llama.cpp's llama-perplexity computes it (tools/perplexity/perplexity.cpp),
// so the two tools' numbers compare:
//   - the whole text is tokenized once, with BOS when the vocabulary adds one;
//   - it is cut into non-overlapping chunks of n_ctx tokens (a tail shorter
//     than n_ctx is dropped), and at least 2 * n_ctx tokens are required;
//   - each chunk runs from an empty KV cache, positions 0 .. n_ctx-1, its
//     first token replaced by BOS when the vocabulary adds one;
//   - only the second half is scored: the logits at positions
//     first = n_ctx/2 .. n_ctx-2 predict the tokens at first+1 .. n_ctx-1,
//     n_ctx - first - 1 tokens per chunk, each given every token before it in
//     the chunk;
//   - PPL = exp(mean NLL) over all scored tokens, NLL = -log softmax(logits)[next];
//     its uncertainty is PPL * sqrt((E[NLL^2] - E[NLL]^2) / (N - 1)), the
//     standard error of the mean NLL carried through exp.
// Everything here is computed in double.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace nexus {

class LlamaContext;

// How a tokenized text is cut into chunks.
struct PerplexityChunks {
  int32_t n_ctx = 0;     // tokens per chunk
  int32_t n_chunks = 0;  // chunks evaluated
  int32_t first = 0;     // first scored logits row: n_ctx / 2
  int32_t n_scored() const { return n_ctx - first - 1; }  // tokens scored per chunk
};

// The chunks of a text of n_tokens tokens (BOS included): n_tokens / n_ctx of
// them, at most max_chunks when max_chunks > 0. Throws nexus::Error when
// n_tokens < 2 * n_ctx (llama-perplexity's requirement; the message says
// both counts) or n_ctx < 4.
PerplexityChunks plan_perplexity_chunks(size_t n_tokens, int32_t n_ctx, int32_t max_chunks);

// Runs one chunk (`chunk.size()` == n_ctx tokens) from an empty cache of
// `ctx` (positions 0 .. n_ctx-1), with chunk[0] replaced by `bos_id` unless it
// is negative, feeding at most n_batch tokens per eval. Returns the float32
// logits of positions first .. n_ctx-2: [n_ctx - first - 1, n_vocab],
// row-major. Throws what LlamaContext::eval throws.
std::vector<float> eval_chunk_scored(LlamaContext& ctx, std::span<const int32_t> chunk, int32_t bos_id,
                                     int32_t first, int32_t n_batch);

// -log softmax(logits)[token], in double. `token` must be in [0, logits.size()).
double token_nll(std::span<const float> logits, int32_t token);

// A value with its standard error.
struct Estimate {
  double value = 0;
  double uncertainty = 0;
};

// Sum and sum of squares of a per-token quantity.
struct MeanAccumulator {
  double sum = 0, sum2 = 0;
  int64_t count = 0;

  void add(double v) {
    sum += v;
    sum2 += v * v;
    ++count;
  }
  // Mean and standard error of the mean, sqrt((E[v^2] - E[v]^2) / (count - 1));
  // the error is 0 below two values or when rounding makes the variance negative.
  Estimate mean() const;
};

// exp(mean NLL) with the uncertainty exp(m) * stderr(m), as llama.cpp.
Estimate perplexity_of(const MeanAccumulator& nll);

}  // namespace nexus
