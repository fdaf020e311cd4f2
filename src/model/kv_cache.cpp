#include "model/kv_cache.h"

#include <algorithm>
#include <cassert>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "kernels/attention.h"
#include "kernels/quant_blocks.h"
#include "model/llama_config.h"
#include "util/error.h"

namespace nexus {

const char* kv_type_name(KvType t) {
  switch (t) {
    case KvType::F32: return "f32";
    case KvType::F16: return "f16";
    case KvType::Q8_0: return "q8_0";
  }
  return "?";
}

std::optional<KvType> kv_type_from_name(std::string_view name) {
  for (KvType t : {KvType::F32, KvType::F16, KvType::Q8_0}) {
    const std::string_view want = kv_type_name(t);
    if (std::equal(name.begin(), name.end(), want.begin(), want.end(),
                   [](char x, char y) { return std::tolower(static_cast<unsigned char>(x)) == y; }))
      return t;
  }
  return std::nullopt;
}

namespace {

size_t bytes_of(size_t values, KvType type) {
  switch (type) {
    case KvType::F32: return values * 4;
    case KvType::F16: return values * 2;
    case KvType::Q8_0: return values + values / 32 * 2;
  }
  return 0;
}

int32_t windowed_layers(const LlamaConfig& c) {
  int32_t n = 0;
  for (int32_t l = 0; l < c.n_layer; ++l) n += c.is_swa(l);
  return n;
}

}  // namespace

size_t KvCache::block_bytes(const LlamaConfig& c, int32_t block_size, KvType type) {
  return bytes_of(2 * static_cast<size_t>(c.n_layer) * static_cast<size_t>(block_size) *
                      static_cast<size_t>(c.n_embd_kv()),
                  type);
}

size_t KvCache::block_bytes(const LlamaConfig& c, int32_t block_size, KvType type, KvPool pool) {
  const int32_t n_w = windowed_layers(c), n = pool == KvPool::Windowed ? n_w : c.n_layer - n_w;
  return bytes_of(2 * static_cast<size_t>(n) * static_cast<size_t>(block_size) * static_cast<size_t>(c.n_embd_kv()),
                  type);
}

int32_t KvCache::blocks_for_budget(const LlamaConfig& c, size_t budget_bytes, int32_t block_size, KvType type) {
  const size_t per = block_bytes(c, block_size, type);
  if (per == 0) return 0;
  const size_t n = budget_bytes / per;
  return n > static_cast<size_t>(std::numeric_limits<int32_t>::max()) ? std::numeric_limits<int32_t>::max()
                                                                      : static_cast<int32_t>(n);
}

void KvCache::Free::operator()(void* p) const { std::free(p); }

KvCache::KvCache(const LlamaConfig& c, int32_t n_blocks, int32_t block_size, KvType type, int32_t n_swa_blocks)
    : block_size_(block_size), n_embd_kv_(c.n_embd_kv()), n_layer_(c.n_layer), type_(type) {
  if (n_blocks < 1) throw Error("KV cache: needs at least one block, got " + std::to_string(n_blocks));
  if (n_swa_blocks < 0) throw Error("KV cache: negative windowed block count " + std::to_string(n_swa_blocks));
  if (block_size < 1 || block_size % kAttnChunk != 0)
    throw Error("KV cache: block size " + std::to_string(block_size) + " must be a positive multiple of " +
                std::to_string(kAttnChunk));
  if (c.n_layer < 1 || n_embd_kv_ < 1) throw Error("KV cache: the model has no layers or no KV heads");
  if (type == KvType::Q8_0 && n_embd_kv_ % 32 != 0)
    throw Error("KV cache: q8_0 needs a KV width that is a multiple of 32; this model's is " +
                std::to_string(n_embd_kv_) + " (use f16)");
  const int32_t n_windowed = windowed_layers(c);
  if (n_swa_blocks > 0 && n_windowed == 0)
    throw Error("KV cache: a windowed pool for a model without sliding-window layers");
  layer_elems_ = 2 * static_cast<int64_t>(block_size) * n_embd_kv_;
  pool_of_.resize(static_cast<size_t>(c.n_layer));
  slot_.resize(static_cast<size_t>(c.n_layer));
  int32_t n_in[2] = {0, 0};
  for (int32_t l = 0; l < c.n_layer; ++l) {
    const int p = n_swa_blocks > 0 && c.is_swa(l) ? 1 : 0;
    pool_of_[static_cast<size_t>(l)] = static_cast<uint8_t>(p);
    slot_[static_cast<size_t>(l)] = n_in[p]++;
  }
  pools_[0] = {n_blocks, 0, n_in[0] * layer_elems_};
  pools_[1] = {n_swa_blocks, 0, n_in[1] * layer_elems_};
  size_t total = 0;
  const size_t per_g = bytes_of(static_cast<size_t>(pools_[0].block_elems), type);
  const size_t per_w = bytes_of(static_cast<size_t>(pools_[1].block_elems), type);
  size_t g = 0, w = 0;
  if (__builtin_mul_overflow(per_g, static_cast<size_t>(n_blocks), &g) ||
      __builtin_mul_overflow(per_w, static_cast<size_t>(n_swa_blocks), &w) || __builtin_add_overflow(g, w, &total) ||
      total > (size_t{1} << 48))
    throw Error("KV cache: " + std::to_string(n_blocks) + " blocks overflow the address space");
  pools_[1].elem0 = pools_[0].block_elems * n_blocks;
  n_elems_ = pools_[1].elem0 + pools_[1].block_elems * n_swa_blocks;
  const size_t bytes = static_cast<size_t>(n_elems_) * element_size();
  scales_offset_ = type == KvType::Q8_0 ? (bytes + 63) / 64 * 64 : bytes;  // Q8_0 scales start on a cache line
  total = type == KvType::Q8_0 ? scales_offset_ + n_scales() * 2 : bytes;
  // 64-byte aligned (cache lines); aligned_alloc wants a multiple of the
  // alignment, and at least one line (an empty global pool of no layers).
  total = std::max<size_t>(64, (total + 63) / 64 * 64);
  data_.reset(std::aligned_alloc(64, total));
  if (!data_)
    throw Error("KV cache: cannot allocate " + std::to_string(total) + " bytes (" + std::to_string(n_blocks) +
                " blocks)");
}

KvCache::~KvCache() = default;

void KvCache::store(int64_t offset, const float* row) {
  switch (type_) {
    case KvType::F32:
      std::memcpy(static_cast<float*>(data_.get()) + offset, row, sizeof(float) * n_embd_kv_);
      return;
    case KvType::F16: {
      uint16_t* dst = static_cast<uint16_t*>(data_.get()) + offset;
      fp32_to_fp16_n(row, dst, n_embd_kv_);
      return;
    }
    case KvType::Q8_0: {  // as ggml's quantize_row_q8_0: d = amax / 127, q = round(x / d)
      int8_t* q = static_cast<int8_t*>(data_.get()) + offset;
      uint16_t* d = mutable_scales() + offset / 32;
      for (int32_t g = 0; g < n_embd_kv_; g += 32) {
        float amax = 0;
        for (int32_t i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(row[g + i]));
        const float scale = amax / 127.0f;
        const float inv = scale != 0 ? 1.0f / scale : 0.0f;
        for (int32_t i = 0; i < 32; ++i) q[g + i] = static_cast<int8_t>(std::lround(row[g + i] * inv));
        d[g / 32] = fp32_to_fp16(scale);
      }
      return;
    }
  }
}

void KvCache::load(int64_t offset, float* out) const {
  switch (type_) {
    case KvType::F32:
      std::memcpy(out, static_cast<const float*>(data_.get()) + offset, sizeof(float) * n_embd_kv_);
      return;
    case KvType::F16: {
      const uint16_t* src = static_cast<const uint16_t*>(data_.get()) + offset;
      for (int32_t i = 0; i < n_embd_kv_; ++i) out[i] = fp16_to_fp32(src[i]);
      return;
    }
    case KvType::Q8_0: {
      const int8_t* q = static_cast<const int8_t*>(data_.get()) + offset;
      const uint16_t* d = scales() + offset / 32;
      for (int32_t i = 0; i < n_embd_kv_; ++i) out[i] = static_cast<float>(q[i]) * fp16_to_fp32(d[i / 32]);
      return;
    }
  }
}

void KvCache::write(int32_t block, int32_t layer, int32_t slot, const float* k_row, const float* v_row) {
  assert(block >= 0 && block < pools_[pool_of_[static_cast<size_t>(layer)]].n_blocks && slot >= 0 &&
         slot < block_size_);
  store(k_offset(block, layer) + static_cast<int64_t>(slot) * n_embd_kv_, k_row);
  store(v_offset(block, layer) + static_cast<int64_t>(slot) * n_embd_kv_, v_row);
}

void KvCache::read_k(int32_t block, int32_t layer, int32_t slot, float* out) const {
  load(k_offset(block, layer) + static_cast<int64_t>(slot) * n_embd_kv_, out);
}

void KvCache::read_v(int32_t block, int32_t layer, int32_t slot, float* out) const {
  load(v_offset(block, layer) + static_cast<int64_t>(slot) * n_embd_kv_, out);
}

}  // namespace nexus
