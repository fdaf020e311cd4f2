// Perplexity the llama-perplexity way: chunk plan, one chunk's scored logits,
// NLL in double, and the estimate with its standard error.
#include "model/perplexity.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "model/llama_context.h"
#include "util/error.h"

namespace nexus {

PerplexityChunks plan_perplexity_chunks(size_t n_tokens, int32_t n_ctx, int32_t max_chunks) {
  // Below 4, a chunk would score no token or score one with no context before it.
  if (n_ctx < 4) throw Error(fmt::format("perplexity: a context of {} tokens is too small (at least 4)", n_ctx));
  const size_t need = 2 * static_cast<size_t>(n_ctx);
  if (n_tokens < need)
    throw Error(fmt::format("perplexity: the text tokenizes to {} token{} (BOS included); a context of {} needs "
                            "at least {} (2 x -c): give a longer text or a smaller -c",
                            n_tokens, n_tokens == 1 ? "" : "s", n_ctx, need));
  PerplexityChunks p;
  p.n_ctx = n_ctx;
  const size_t all = n_tokens / static_cast<size_t>(n_ctx);
  p.n_chunks = static_cast<int32_t>(max_chunks > 0 ? std::min(all, static_cast<size_t>(max_chunks)) : all);
  p.first = n_ctx / 2;
  return p;
}

std::vector<float> eval_chunk_scored(LlamaContext& ctx, std::span<const int32_t> chunk, int32_t bos_id,
                                     int32_t first, int32_t n_batch) {
  const int32_t n_ctx = static_cast<int32_t>(chunk.size());
  if (n_batch < 1) throw Error("perplexity: the batch size must be positive");
  if (first < 1 || first > n_ctx - 2) throw Error(fmt::format("perplexity: no position to score in a chunk of {}", n_ctx));
  std::vector<int32_t> tokens(chunk.begin(), chunk.end());
  if (bos_id >= 0) tokens[0] = bos_id;

  ctx.truncate(0);
  std::vector<float> scored;
  size_t n_vocab = 0;
  // Pieces of at most n_batch tokens, cut at multiples of n_batch as
  // llama.cpp cuts them, and also at `first`: positions before it need no
  // logits (eval computes only the last row), those from it on all of theirs.
  for (int32_t pos = 0; pos < n_ctx;) {
    int32_t end = std::min(n_ctx, (pos / n_batch + 1) * n_batch);
    if (pos < first) end = std::min(end, first);
    const std::span<const int32_t> piece(tokens.data() + pos, static_cast<size_t>(end - pos));
    if (end <= first) {
      ctx.eval(piece);
    } else {
      const std::span<const float> rows = ctx.eval_all(piece);
      n_vocab = rows.size() / piece.size();
      // Keep rows of positions [first, n_ctx - 2]; the last position predicts
      // a token outside the chunk.
      const int32_t keep_end = std::min(end, n_ctx - 1);
      scored.insert(scored.end(), rows.begin(), rows.begin() + static_cast<ptrdiff_t>((keep_end - pos) * n_vocab));
    }
    pos = end;
  }
  return scored;
}

double token_nll(std::span<const float> logits, int32_t token) {
  double max = logits[0];
  for (float z : logits) max = std::max(max, static_cast<double>(z));
  double sum = 0;
  for (float z : logits) sum += std::exp(static_cast<double>(z) - max);
  return max + std::log(sum) - static_cast<double>(logits[static_cast<size_t>(token)]);
}

Estimate MeanAccumulator::mean() const {
  Estimate e;
  if (count == 0) return e;
  const double n = static_cast<double>(count);
  e.value = sum / n;
  const double var = sum2 / n - e.value * e.value;
  if (count > 1 && var > 0) e.uncertainty = std::sqrt(var / (n - 1));
  return e;
}

Estimate perplexity_of(const MeanAccumulator& nll) {
  const Estimate m = nll.mean();
  const double ppl = std::exp(m.value);
  return {ppl, ppl * m.uncertainty};
}

}  // namespace nexus
