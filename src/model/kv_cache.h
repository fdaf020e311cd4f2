// KvCache: the paged KV cache storage of a LlamaModel, one arena of
// fixed-size blocks shared by every sequence (Kwon et al. 2023,
// "PagedAttention"). This class only stores: which sequence owns which block,
// and which blocks hold a shared prefix, is the BlockManager's business
// (src/engine/block_manager.h); the batched forward pass
// (model/batch_forward.h) reads and writes rows through a block table.
//
// Layout, elements of `type`:
//   [n_blocks][n_layer][2 (K, V)][block_size][n_embd_kv]
// A block is one contiguous slab holding all layers' K and V for its
// block_size positions, so copying, swapping or zeroing a block is one
// memcpy; within a (block, layer) the K rows are the [position, n_embd_kv]
// rows attention_head expects (kv_stride = n_embd_kv), so the paged kernel
// walks a block like a contiguous [position, n_embd_kv] cache.
//
// Element type: F16 by default (half the memory of F32, the usual choice of
// serving engines; values are rounded to nearest-even when written and widened
// exactly when read). F32 stores what the model computed bit for bit, so a
// forward pass with an F32 cache reproduces the model's float32 result
// exactly (the reference tests use it). Q8_0 (ggml's block format, split in two arrays)
// stores each group of 32 consecutive values of a row as int8 q with one
// fp16 scale d = max|x| / 127, x ~= q * d: int8 values at the element
// offsets below (element size 1), and after them the scales, one per 32
// elements, at scale index = element offset / 32. It needs n_embd_kv % 32 == 0
// so that no group straddles two rows. 1.0625 bytes per value, 47% less than
// F16; the accuracy cost on the shared models is in docs/benchmarks.md.
//
// Memory is reserved but not touched at construction (the OS commits pages on
// first write).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

namespace nexus {

struct LlamaConfig;

enum class KvType { F32, F16, Q8_0 };
const char* kv_type_name(KvType t);  // "f32", "f16", "q8_0"
// The type named by kv_type_name's string in any case ("Q8_0" is Q8_0);
// nullopt for anything else.
std::optional<KvType> kv_type_from_name(std::string_view name);

constexpr int32_t kDefaultBlockSize = 16;

class KvCache {
 public:
  // Throws nexus::Error when n_blocks < 1, block_size is not a positive
  // multiple of kAttnChunk (16), the arena would overflow size_t, or the type
  // is Q8_0 and n_embd_kv is not a multiple of 32.
  KvCache(const LlamaConfig& config, int32_t n_blocks, int32_t block_size = kDefaultBlockSize,
          KvType type = KvType::F16);
  ~KvCache();
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  // Bytes of one block: 2 * n_layer * block_size * n_embd_kv * element size
  // (Q8_0: 1 byte per value plus 2 per 32 values).
  static size_t block_bytes(const LlamaConfig& config, int32_t block_size, KvType type);
  // How many blocks fit in `budget_bytes` (0 when not even one does).
  static int32_t blocks_for_budget(const LlamaConfig& config, size_t budget_bytes,
                                   int32_t block_size = kDefaultBlockSize, KvType type = KvType::F16);

  int32_t n_blocks() const { return n_blocks_; }
  int32_t block_size() const { return block_size_; }
  KvType type() const { return type_; }
  size_t element_size() const { return type_ == KvType::F32 ? 4 : type_ == KvType::F16 ? 2 : 1; }
  size_t total_bytes() const { return scales_offset_ + (type_ == KvType::Q8_0 ? n_scales() * 2 : 0); }

  // Element offsets (multiply by element_size() for bytes) from data():
  // K row 0 of (block, layer), V row 0 of (block, layer), elements per block.
  int64_t k_offset(int32_t block, int32_t layer) const { return block * block_elems_ + layer * layer_elems_; }
  int64_t v_offset(int32_t block, int32_t layer) const { return k_offset(block, layer) + layer_elems_ / 2; }
  int64_t block_elems() const { return block_elems_; }
  int32_t n_embd_kv() const { return n_embd_kv_; }
  int32_t n_layer() const { return n_layer_; }

  void* data() { return data_.get(); }
  const void* data() const { return data_.get(); }
  // Q8_0 only: the fp16 scales, scale of element offset e at index e / 32.
  const uint16_t* scales() const {
    return reinterpret_cast<const uint16_t*>(static_cast<const uint8_t*>(data_.get()) + scales_offset_);
  }

  // Stores one position's K and V rows ([n_embd_kv] float32 each) of `layer`
  // at row `slot` of `block`, converting to the cache type. No bounds checks
  // beyond debug asserts: the caller validated the block table.
  void write(int32_t block, int32_t layer, int32_t slot, const float* k_row, const float* v_row);

  // Reads one position's K or V row back as float32 (for tests and tools).
  void read_k(int32_t block, int32_t layer, int32_t slot, float* out) const;
  void read_v(int32_t block, int32_t layer, int32_t slot, float* out) const;

 private:
  void store(int64_t offset, const float* row);
  void load(int64_t offset, float* out) const;
  size_t n_scales() const { return static_cast<size_t>(n_blocks_) * block_elems_ / 32; }
  uint16_t* mutable_scales() { return reinterpret_cast<uint16_t*>(static_cast<uint8_t*>(data_.get()) + scales_offset_); }

  int32_t n_blocks_, block_size_, n_embd_kv_, n_layer_;
  KvType type_;
  int64_t layer_elems_ = 0;  // 2 * block_size * n_embd_kv
  int64_t block_elems_ = 0;  // n_layer * layer_elems
  size_t scales_offset_ = 0; // bytes of the values (Q8_0: where the scales start)
  struct Free {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, Free> data_;
};

}  // namespace nexus
