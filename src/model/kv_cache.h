// KvCache: the paged KV cache storage of a LlamaModel, one arena of
// fixed-size blocks shared by every sequence (Kwon et al. 2023,
// "PagedAttention"). This class only stores: which sequence owns which block,
// and which blocks hold a shared prefix, is the BlockManager's business
// (src/engine/block_manager.h); the batched forward pass
// (model/batch_forward.h) reads and writes rows through a block table.
//
// Layout, elements of `type`: one or two pools of blocks (KvPool).
//   global:   [n_blocks][n_layer_g][2 (K, V)][block_size][n_embd_kv]
//   windowed: [n_swa_blocks][n_layer_w][2 (K, V)][block_size][n_embd_kv]
// the windowed pool right after the global one. Without a windowed pool
// (n_swa_blocks = 0: llama, and any model whose cache is not split) every
// layer is in the global pool, layer l at slot l: the layout before sliding
// windows, the same offsets. With one, the layers LlamaConfig::is_swa()
// names (the sliding-window layers) live in the windowed pool and the others
// in the global pool, each in layer order; a sequence then has one block
// table per pool (engine/block_manager.h), and the windowed blocks that fall
// out of every windowed layer's window are given back while the global
// layers keep the whole history. A block is one contiguous slab holding its
// pool's layers' K and V for its block_size positions, so copying, swapping
// or zeroing a block is one memcpy; within a (block, layer) the K rows are
// the [position, n_embd_kv] rows attention_head expects (kv_stride =
// n_embd_kv), so the paged kernel walks a block like a contiguous
// [position, n_embd_kv] cache with block_stride(layer) between blocks.
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
#include <vector>

namespace nexus {

struct LlamaConfig;

enum class KvType { F32, F16, Q8_0 };
// Which pool a layer's blocks come from (see the layout above).
enum class KvPool { Global, Windowed };
const char* kv_type_name(KvType t);  // "f32", "f16", "q8_0"
// The type named by kv_type_name's string in any case ("Q8_0" is Q8_0);
// nullopt for anything else.
std::optional<KvType> kv_type_from_name(std::string_view name);

constexpr int32_t kDefaultBlockSize = 16;

class KvCache {
 public:
  // n_blocks: blocks of the global pool; n_swa_blocks: blocks of the windowed
  // pool, 0 = none (every layer in the global pool). Throws nexus::Error when
  // n_blocks < 1, n_swa_blocks < 0 or > 0 for a model without sliding-window
  // layers, block_size is not a positive multiple of kAttnChunk (16), the
  // arena would overflow size_t, or the type is Q8_0 and n_embd_kv is not a
  // multiple of 32. A model whose layers are all windowed has an empty global
  // pool (0 bytes a block) that still numbers the positions.
  KvCache(const LlamaConfig& config, int32_t n_blocks, int32_t block_size = kDefaultBlockSize,
          KvType type = KvType::F16, int32_t n_swa_blocks = 0);
  ~KvCache();
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  // Bytes of one block of every layer: 2 * n_layer * block_size * n_embd_kv *
  // element size (Q8_0: 1 byte per value plus 2 per 32 values).
  static size_t block_bytes(const LlamaConfig& config, int32_t block_size, KvType type);
  // The same for the layers of one pool of a split cache: Global, the layers
  // without a window; Windowed, those with one (is_swa).
  static size_t block_bytes(const LlamaConfig& config, int32_t block_size, KvType type, KvPool pool);
  // How many blocks of every layer fit in `budget_bytes` (0 when not even one does).
  static int32_t blocks_for_budget(const LlamaConfig& config, size_t budget_bytes,
                                   int32_t block_size = kDefaultBlockSize, KvType type = KvType::F16);

  int32_t n_blocks() const { return pools_[0].n_blocks; }
  int32_t n_swa_blocks() const { return pools_[1].n_blocks; }
  // Whether the windowed layers have their own pool (n_swa_blocks > 0).
  bool split() const { return pools_[1].n_blocks > 0; }
  KvPool pool(int32_t layer) const { return pool_of_[static_cast<size_t>(layer)] ? KvPool::Windowed : KvPool::Global; }
  int32_t block_size() const { return block_size_; }
  KvType type() const { return type_; }
  size_t element_size() const { return type_ == KvType::F32 ? 4 : type_ == KvType::F16 ? 2 : 1; }
  size_t total_bytes() const { return scales_offset_ + (type_ == KvType::Q8_0 ? n_scales() * 2 : 0); }

  // Element offsets (multiply by element_size() for bytes) from data():
  // K row 0 of (block, layer), V row 0 of (block, layer), where `block`
  // numbers the blocks of the layer's pool.
  int64_t k_offset(int32_t block, int32_t layer) const {
    const Pool& p = pools_[pool_of_[static_cast<size_t>(layer)]];
    return p.elem0 + block * p.block_elems + slot_[static_cast<size_t>(layer)] * layer_elems_;
  }
  int64_t v_offset(int32_t block, int32_t layer) const { return k_offset(block, layer) + layer_elems_ / 2; }
  // Elements between consecutive blocks of the layer's pool.
  int64_t block_stride(int32_t layer) const { return pools_[pool_of_[static_cast<size_t>(layer)]].block_elems; }
  // Elements of one block of the global pool (block_stride of its layers).
  int64_t block_elems() const { return pools_[0].block_elems; }
  int32_t n_embd_kv() const { return n_embd_kv_; }
  int32_t n_layer() const { return n_layer_; }

  void* data() { return data_.get(); }
  const void* data() const { return data_.get(); }
  // Q8_0 only: the fp16 scales, scale of element offset e at index e / 32.
  const uint16_t* scales() const {
    return reinterpret_cast<const uint16_t*>(static_cast<const uint8_t*>(data_.get()) + scales_offset_);
  }

  // Stores one position's K and V rows ([n_embd_kv] float32 each) of `layer`
  // at row `slot` of `block` (of the layer's pool), converting to the cache
  // type. No bounds checks beyond debug asserts: the caller validated the
  // block table.
  void write(int32_t block, int32_t layer, int32_t slot, const float* k_row, const float* v_row);

  // Reads one position's K or V row back as float32 (for tests and tools).
  void read_k(int32_t block, int32_t layer, int32_t slot, float* out) const;
  void read_v(int32_t block, int32_t layer, int32_t slot, float* out) const;

 private:
  struct Pool {
    int32_t n_blocks = 0;
    int64_t elem0 = 0;        // where its block 0 starts
    int64_t block_elems = 0;  // its layers * layer_elems
  };
  void store(int64_t offset, const float* row);
  void load(int64_t offset, float* out) const;
  size_t n_scales() const { return static_cast<size_t>(n_elems_) / 32; }
  uint16_t* mutable_scales() { return reinterpret_cast<uint16_t*>(static_cast<uint8_t*>(data_.get()) + scales_offset_); }

  int32_t block_size_, n_embd_kv_, n_layer_;
  KvType type_;
  int64_t layer_elems_ = 0;  // 2 * block_size * n_embd_kv
  Pool pools_[2];            // KvPool::Global, KvPool::Windowed
  std::vector<uint8_t> pool_of_;  // per layer: 0 global, 1 windowed
  std::vector<int32_t> slot_;     // per layer: its index among its pool's layers
  int64_t n_elems_ = 0;      // values of both pools
  size_t scales_offset_ = 0; // bytes of the values (Q8_0: where the scales start)
  struct Free {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, Free> data_;
};

}  // namespace nexus
