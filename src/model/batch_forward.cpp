// The batched forward pass: forward_steps.h for everything per token, the
// paged cache and attention_head_paged for K/V.
#include "model/batch_forward.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <string>
#include <string_view>

#include "kernels/attention.h"
#include "kernels/attention_window.h"
#include "kernels/ops.h"
#include "kernels/thread_pool.h"
#include "model/cpu_ops.h"
#include "model/forward_steps.h"
#include "model/kv_cache.h"
#include "model/llama_model.h"
#include "util/error.h"

namespace nexus {
namespace {

// gemma3's windowed layers turn at another base: a second angle table.
bool separate_swa_rope(const LlamaConfig& c) {
  return c.n_swa > 0 && c.rope_freq_base_swa != c.rope_freq_base;
}

// Query heads per attention kernel call (kernels/attention.h); every choice
// gives the same bits. Eight at head size 8, or 4 without GQA: in
// bench_attention 1.9x the per-head kernel at head size 8, 2.4x at 4 with
// group 1, but 0.7x at 4 with group 2 (each register then gathers two half
// rows). Sixteen at head size 4 without GQA on AVX-512: 1.65x eight. The
// Q8_0 cache has only the per-head kernel.
int32_t attention_heads_per_task(const LlamaConfig& c, KvType type) {
  const int32_t hd = c.head_dim, group = c.n_head / c.n_head_kv;
  if (type == KvType::Q8_0 || c.n_swa > 0 || c.attn_softcap > 0) return 1;
  if (hd == 4 && group == 1 && c.n_head % 16 == 0 && attention_heads16_hd4_supported()) return 16;
  if ((hd == 8 || (hd == 4 && group == 1)) && c.n_head % 8 == 0 && 8 % group == 0) return 8;
  return 1;
}

KvElem kv_elem(KvType type) {
  return type == KvType::F32 ? KvElem::F32 : type == KvType::F16 ? KvElem::F16 : KvElem::Q8_0;
}

}  // namespace

BatchForward::BatchForward(const LlamaModel& model, KvCache& cache, int32_t n_threads, int32_t n_ctx)
    : BatchForward(model, cache, std::make_unique<ThreadPool>(n_threads), nullptr, n_ctx) {}

BatchForward::BatchForward(const LlamaModel& model, KvCache& cache, ThreadPool& pool, int32_t n_ctx)
    : BatchForward(model, cache, nullptr, &pool, n_ctx) {}

BatchForward::BatchForward(const LlamaModel& model, KvCache& cache, std::unique_ptr<ThreadPool> own,
                           ThreadPool* borrowed, int32_t n_ctx)
    : model_(model),
      cache_(cache),
      own_pool_(std::move(own)),
      pool_(own_pool_ ? own_pool_.get() : borrowed),
      rope_factors_(model.rope_factors_for(n_ctx)),
      act_(std::make_unique<Activations>()) {
  const LlamaConfig& c = model.config();
  if (c.head_dim > kMaxHeadDim)
    throw Error("head size " + std::to_string(c.head_dim) + " exceeds the supported " + std::to_string(kMaxHeadDim));
  if (cache.n_layer() != c.n_layer || cache.n_embd_kv() != c.n_embd_kv())
    throw Error("batch forward: the KV cache was made for " + std::to_string(cache.n_layer()) + " layers of width " +
                std::to_string(cache.n_embd_kv()) + ", the model has " + std::to_string(c.n_layer) + " of width " +
                std::to_string(c.n_embd_kv()));
  serial_ = std::make_unique<ThreadPool>(1);
  constexpr size_t kMaxLayerBytes = size_t{512} << 10;  // splits_by_token(): kept in L2
  const LlamaLayer& L = model.layers().front();
  size_t bytes = 0;
  for (auto m : LlamaLayer::matrices()) bytes += (L.*m).n_bytes();
  small_layers_ = bytes <= kMaxLayerBytes;
  heads_per_task_ = attention_heads_per_task(c, cache.type());
  // NEXUS_ATTENTION=per_head turns the tiles off: the same bits, for side-by-
  // side timings in one binary (docs/benchmarks.md, "Prefill at depth").
  const char* mode = std::getenv("NEXUS_ATTENTION");
  if (mode && *mode && std::string_view(mode) != "tiled" && std::string_view(mode) != "per_head")
    throw Error(std::string("NEXUS_ATTENTION: '") + mode + "' is not tiled or per_head");
  attention_tiles_ = !(mode && std::string_view(mode) == "per_head");
}

BatchForward::~BatchForward() = default;

void BatchForward::validate(std::span<const SeqRun> runs) const {
  const LlamaConfig& c = model_.config();
  if (runs.empty()) throw Error("batch forward: no sequences");
  const int64_t bs = cache_.block_size();
  for (size_t r = 0; r < runs.size(); ++r) {
    const SeqRun& run = runs[r];
    const std::string which = "batch forward: sequence " + std::to_string(r);
    if (run.tokens.empty()) throw Error(which + " has no tokens");
    check_token_ids(c, run.tokens, which.c_str());
    const int64_t end = static_cast<int64_t>(run.n_past) + static_cast<int64_t>(run.tokens.size());
    if (run.n_past < 0 || end > c.n_ctx_train)
      throw Error(which + ": positions " + std::to_string(run.n_past) + ".." + std::to_string(end - 1) +
                  " are outside the model's context of " + std::to_string(c.n_ctx_train));
    const int64_t n_blocks = (end + bs - 1) / bs;
    if (static_cast<int64_t>(run.block_table.size()) < n_blocks)
      throw Error(which + ": " + std::to_string(end) + " positions need " + std::to_string(n_blocks) +
                  " blocks, its block table has " + std::to_string(run.block_table.size()));
    for (int64_t i = 0; i < n_blocks; ++i)
      if (run.block_table[i] < 0 || run.block_table[i] >= cache_.n_blocks())
        throw Error(which + ": block " + std::to_string(run.block_table[i]) + " is outside the cache of " +
                    std::to_string(cache_.n_blocks()) + " blocks");
    if (!cache_.split()) continue;
    if (static_cast<int64_t>(run.swa_block_table.size()) < n_blocks)
      throw Error(which + ": " + std::to_string(end) + " positions need " + std::to_string(n_blocks) +
                  " windowed blocks, its windowed block table has " + std::to_string(run.swa_block_table.size()));
    // The first run token reads the window from n_past - n_swa + 1 on.
    for (int64_t i = std::max<int64_t>(0, run.n_past - c.n_swa + 1) / bs; i < n_blocks; ++i)
      if (run.swa_block_table[i] < 0 || run.swa_block_table[i] >= cache_.n_swa_blocks())
        throw Error(which + ": windowed block " + std::to_string(run.swa_block_table[i]) + " at position " +
                    std::to_string(i * bs) + " is outside the windowed pool of " +
                    std::to_string(cache_.n_swa_blocks()) + " blocks");
  }
}

std::span<const float> BatchForward::forward(std::span<const SeqRun> runs) {
  run_batch(runs);
  output_logits(model_, *act_, rows_, logits_, *pool_);
  return logits_;
}

std::span<const float> BatchForward::hidden_states(std::span<const SeqRun> runs) {
  run_batch(runs);
  const auto E = static_cast<size_t>(model_.config().n_embd);
  hidden_.resize(tokens_.size() * E);
  for (size_t t = 0; t < tokens_.size(); ++t) output_norm(model_, &act_->x[t * E], &hidden_[t * E]);
  return hidden_;
}

void BatchForward::run_batch(std::span<const SeqRun> runs) {
  validate(runs);
  const LlamaConfig& c = model_.config();
  tokens_.clear();
  pos_.clear();
  run_of_.clear();
  rows_.clear();
  for (size_t r = 0; r < runs.size(); ++r) {
    const SeqRun& run = runs[r];
    for (size_t i = 0; i < run.tokens.size(); ++i) {
      if (run.all_logits) rows_.push_back(static_cast<int32_t>(tokens_.size()));
      tokens_.push_back(run.tokens[i]);
      pos_.push_back(run.n_past + static_cast<int32_t>(i));
      run_of_.push_back(static_cast<int32_t>(r));
    }
    if (run.want_logits && !run.all_logits) rows_.push_back(static_cast<int32_t>(tokens_.size()) - 1);
  }
  const int32_t n = static_cast<int32_t>(tokens_.size());
  Activations& a = *act_;
  a.resize(c, static_cast<size_t>(n));

  embed_tokens(model_, tokens_, a);
  // Each token's angles, once for all layers.
  const float* factors = rope_factors_;
  rope_cs_.resize(static_cast<size_t>(n) * c.n_rot);
  rope_tables(c, factors, pos_.data(), n, false, rope_cs_.data());
  if (separate_swa_rope(c)) {
    rope_cs_swa_.resize(static_cast<size_t>(n) * c.n_rot);
    rope_tables(c, factors, pos_.data(), n, true, rope_cs_swa_.data());
  }
  if (splits_by_token(runs)) {
    // Each thread takes a contiguous share of the batch's sequences through
    // every layer on its own (1-thread pool): one fork/join per pass.
    pool_->parallel_for(n, [&](int64_t t0, int64_t t1) { run_layers({t0, t1}, runs, *serial_); });
  } else {
    run_layers({0, n}, runs, *pool_);
  }
}

// Decode-only batches (one token per sequence) of a model whose layers are
// small: a token's layers then depend on nothing but its own sequence's K/V,
// and its products are too small to split by rows (matmul runs them on one
// thread below kMinParallelWork; TinyLLama-v0's are 16-64 K multiply-adds per
// token), so the per-layer products, norms, RoPE and K/V writes ran on the
// calling thread while the other one waited: 32% of the wall time of an
// 8-stream step (thread-pool probe). Split by token, each thread reads every
// layer's weights, which is cheap only while they stay in its L2, hence the
// size limit. Same bits either way: every step treats each token alone
// (matmul gives each row the same bits whatever the token count).
bool BatchForward::splits_by_token(std::span<const SeqRun> runs) const {
  // At least two tokens per thread: with one, every product of a thread is a
  // matrix-vector product, and 2 streams measured 3% slower split than not.
  if (!small_layers_ || pool_->size() < 2 || static_cast<int64_t>(runs.size()) < 2 * pool_->size()) return false;
  for (const SeqRun& run : runs)
    if (run.tokens.size() != 1) return false;
  return true;
}

void BatchForward::run_layers(TokenRange r, std::span<const SeqRun> runs, ThreadPool& pool) {
  const LlamaConfig& c = model_.config();
  RopeTables cs{&rope_cs_[r.begin * c.n_rot], separate_swa_rope(c) ? &rope_cs_swa_[r.begin * c.n_rot] : nullptr};
  // The same for every layer; none where no layer can take them (the
  // heads-in-lanes kernels, NEXUS_ATTENTION=per_head): no allocation then.
  const std::vector<AttnTile> tiles = attention_tiles_ && heads_per_task_ == 1 ? attention_tiles(r) : std::vector<AttnTile>{};
  auto attend = [&](int32_t layer, const float* q, const float* k, const float* v, float* out, int64_t) {
    write_kv(layer, runs, r, k, v);  // every token's K/V before any attention reads them
    attention(layer, runs, r, tiles, q, out, pool);
  };
  auto ops = cpu_ops(c, pool, cs, attend);
  const LayerBuffers b = act_->rows_from(c, r.begin);
  for (int32_t l = 0; l < c.n_layer; ++l) forward_layer(ops, c, model_.layers()[static_cast<size_t>(l)], l, b, r.size());
}

std::span<const int32_t> BatchForward::table(const SeqRun& run, int32_t layer) const {
  return cache_.pool(layer) == KvPool::Windowed ? run.swa_block_table : run.block_table;
}

void BatchForward::write_kv(int32_t layer, std::span<const SeqRun> runs, TokenRange r, const float* k,
                            const float* v) {
  const int32_t bs = cache_.block_size();
  const int64_t KV = cache_.n_embd_kv();
  for (int64_t t = r.begin; t < r.end; ++t) {
    const int32_t p = pos_[t];
    const int32_t block = table(runs[static_cast<size_t>(run_of_[t])], layer)[static_cast<size_t>(p / bs)];
    cache_.write(block, layer, p % bs, &k[(t - r.begin) * KV], &v[(t - r.begin) * KV]);
  }
}

// Causal attention with GQA (query head h reads KV head h / (n_head /
// n_head_kv)): token t at position p attends to its sequence's positions
// [0, p], or [p - n_swa + 1, p] in a windowed layer. q, out: rows of r.
// Two ways to split it into tasks, with the same bits (every kernel gives a
// row the arithmetic of attention_head_paged*): by tile, a run of up to
// kTileRows / group consecutive tokens of one sequence times the query heads
// of one KV head (attention_rows_paged, which reads each K/V chunk once for
// all of them: prefill, and decode batches with enough sequences); or by
// token and heads_per_task_ query heads (1, 8 or 16, attention_heads_per_task).
// Each task writes only its own output, so the thread split does not change
// any result.
void BatchForward::attention(int32_t layer, std::span<const SeqRun> runs, TokenRange r,
                             std::span<const AttnTile> tiles, const float* q_rows, float* out_rows, ThreadPool& pool) {
  const LlamaConfig& c = model_.config();
  const int32_t hd = c.head_dim, group = c.n_head / c.n_head_kv, Q = c.n_embd_q();
  const float scale = c.attn_scale, cap = c.attn_softcap;
  const int32_t window = c.is_swa(layer) ? c.n_swa : 0;
  const KvType type = cache_.type();
  const bool tiled_kernel = attention_tiles_ && heads_per_task_ == 1 && window == 0 && cap <= 0;
  if (tiled_kernel && attention_by_tile(layer, runs, r, tiles, q_rows, out_rows, pool)) return;
  const int32_t heads_per_task = heads_per_task_;
  const int32_t tasks_per_token = c.n_head / heads_per_task;
  const int64_t n_tasks = r.size() * tasks_per_token;

  auto heads = [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      // Tokens taken in the order 0, n-1, 1, n-2, ...: a causal token's cost
      // grows with its position, so contiguous task ranges (the pool's split)
      // then hold equal work rather than the early, cheap tokens on one thread.
      const int64_t j = task / tasks_per_token, n_tok = r.size();
      const size_t t = static_cast<size_t>(r.begin + (j % 2 == 0 ? j / 2 : n_tok - 1 - j / 2));
      const int32_t h = static_cast<int32_t>(task % tasks_per_token) * heads_per_task;
      const PagedKv kv = paged_kv(layer, runs[static_cast<size_t>(run_of_[t])], h / group);
      const int64_t row = static_cast<int64_t>(t) - r.begin;
      const float* q = &q_rows[row * Q + h * hd];
      float* out = &out_rows[row * Q + h * hd];
      const int32_t n_keys = pos_[t] + 1, first = window > 0 ? std::max(0, n_keys - window) : 0;
      if (first > 0 || cap > 0) {
        attention_head_paged_window(q, kv, kv_elem(type), first, n_keys, hd, scale, cap, out);
        continue;
      }
      if (heads_per_task == 16) {
        if (type == KvType::F16) attention_heads16_hd4_paged_f16(q, kv, pos_[t] + 1, scale, out);
        else attention_heads16_hd4_paged(q, kv, pos_[t] + 1, scale, out);
        continue;
      }
      if (heads_per_task == 8) {
        if (type == KvType::F16) attention_heads8_paged_f16(q, kv, pos_[t] + 1, hd, group, scale, out);
        else attention_heads8_paged(q, kv, pos_[t] + 1, hd, group, scale, out);
        continue;
      }
      switch (type) {
        case KvType::F32: attention_head_paged(q, kv, pos_[t] + 1, hd, scale, out); break;
        case KvType::F16: attention_head_paged_f16(q, kv, pos_[t] + 1, hd, scale, out); break;
        case KvType::Q8_0: attention_head_paged_q8(q, kv, pos_[t] + 1, hd, scale, out); break;
      }
    }
  };
  run_attention_tasks(r, n_tasks, heads, pool);
}

template <class Fn>
void BatchForward::run_attention_tasks(TokenRange r, int64_t n_tasks, Fn& fn, ThreadPool& pool) const {
  const LlamaConfig& c = model_.config();
  int64_t work = 0;  // multiply-adds, to skip waking the workers for tiny steps
  for (int64_t t = r.begin; t < r.end; ++t)
    work += static_cast<int64_t>(pos_[static_cast<size_t>(t)] + 1) * c.n_head * c.head_dim;
  // Tasks differ in length (each token attends to its own position + 1):
  // pieces of 1/16 of a thread's share let a thread that finishes early take
  // the rest of another's.
  if (work < (1 << 13)) fn(0, n_tasks);
  else pool.parallel_for_stealing(n_tasks, std::max<int64_t>(1, n_tasks / (16 * pool.size())), fn);
}

PagedKv BatchForward::paged_kv(int32_t layer, const SeqRun& run, int32_t kv_head) const {
  const int64_t kv_off = static_cast<int64_t>(kv_head) * model_.config().head_dim;
  const auto* base = static_cast<const uint8_t*>(cache_.data());
  PagedKv kv;
  kv.k_elem0 = cache_.k_offset(0, layer) + kv_off;
  kv.v_elem0 = cache_.v_offset(0, layer) + kv_off;
  kv.k = base + kv.k_elem0 * cache_.element_size();
  kv.v = base + kv.v_elem0 * cache_.element_size();
  kv.scales = cache_.type() == KvType::Q8_0 ? cache_.scales() : nullptr;
  kv.block_table = table(run, layer).data();
  kv.block_size = cache_.block_size();
  kv.block_stride = cache_.block_stride(layer);
  kv.kv_stride = cache_.n_embd_kv();
  return kv;
}

std::vector<BatchForward::AttnTile> BatchForward::attention_tiles(TokenRange r) const {
  const LlamaConfig& c = model_.config();
  const int32_t tile_tokens = std::max(1, kTileRows / (c.n_head / c.n_head_kv));
  std::vector<AttnTile> tiles;
  for (int64_t t = r.begin; t < r.end;) {
    int64_t e = t + 1;
    while (e < r.end && e - t < tile_tokens && run_of_[static_cast<size_t>(e)] == run_of_[static_cast<size_t>(t)]) ++e;
    tiles.push_back({t, e});
    t = e;
  }
  return tiles;
}

bool BatchForward::attention_by_tile(int32_t layer, std::span<const SeqRun> runs, TokenRange r,
                                     std::span<const AttnTile> tiles, const float* q_rows, float* out_rows,
                                     ThreadPool& pool) {
  const LlamaConfig& c = model_.config();
  const int32_t hd = c.head_dim, group = c.n_head / c.n_head_kv, Q = c.n_embd_q();
  const auto n_tiles = static_cast<int64_t>(tiles.size()), n_tasks = n_tiles * c.n_head_kv;
  // Too few tasks to keep every thread busy to the end (one decoding
  // sequence): the per-token split has n_head tasks per token.
  if (n_tasks < 4 * pool.size()) return false;
  const KvElem elem = kv_elem(cache_.type());
  const float scale = c.attn_scale;
  auto run_tiles = [&](int64_t begin, int64_t end) {
    std::array<AttnRow, kTileRows> rows;
    for (int64_t task = begin; task < end; ++task) {
      // Tiles taken in the order 0, n-1, 1, n-2, ...: a causal tile's cost
      // grows with its positions, so contiguous task ranges hold equal work.
      const int64_t j = task / c.n_head_kv;
      const AttnTile& tile = tiles[static_cast<size_t>(j % 2 == 0 ? j / 2 : n_tiles - 1 - j / 2)];
      const auto kv_head = static_cast<int32_t>(task % c.n_head_kv);
      size_t n = 0;
      for (int64_t t = tile.begin; t < tile.end; ++t)
        for (int32_t h = kv_head * group; h < (kv_head + 1) * group; ++h) {
          const int64_t at = (t - r.begin) * Q + static_cast<int64_t>(h) * hd;
          rows[n++] = AttnRow{&q_rows[at], &out_rows[at], pos_[static_cast<size_t>(t)] + 1};
        }
      const PagedKv kv = paged_kv(layer, runs[static_cast<size_t>(run_of_[static_cast<size_t>(tile.begin)])], kv_head);
      attention_rows_paged(std::span(rows).first(n), kv, elem, hd, scale);
    }
  };
  run_attention_tasks(r, n_tasks, run_tiles, pool);
  return true;
}

}  // namespace nexus
