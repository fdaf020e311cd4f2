// GgufFile: a read-only, memory-mapped GGUF model file.
//
// Source: the GGUF specification (ggml docs/gguf.md). Layout of a file:
//   magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv
//   n_kv x (string key, u32 value type, value)
//   n_tensors x (string name, u32 n_dims, n_dims x u64 ne, u32 ggml type, u64 offset)
//   padding to general.alignment (default 32) | tensor data
// Strings are u64 length + bytes (no NUL). Version 1 used u32 for counts and
// lengths; it is read as well (see gguf_file.cpp).
//
// Every count, length, offset and tensor extent is checked against the file
// size before it is used: a truncated, corrupt or hostile file makes the
// constructor throw nexus::Error naming the problem, never read out of bounds.
// Tensor data is never copied: TensorInfo::data points into the mapping,
// which lives as long as the GgufFile.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "gguf/ggml_type.h"

namespace nexus {

// GGUF metadata value types (gguf_metadata_value_type in the spec).
enum class GgufValueType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5,
  FLOAT32 = 6, BOOL = 7, STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};

std::string_view gguf_value_type_name(GgufValueType t);

// A metadata array. Integer arrays are widened to int64 (u64 values above
// INT64_MAX keep their bits), float arrays to double; nested arrays are
// kept as-is.
struct GgufArray;

// A metadata value: integers widened to int64 / uint64 by signedness, floats
// to double. `type` keeps the type that was stored in the file.
struct GgufValue {
  GgufValueType type = GgufValueType::UINT8;
  std::variant<uint64_t, int64_t, double, bool, std::string, std::shared_ptr<GgufArray>> v;
};

struct GgufArray {
  GgufValueType elem_type = GgufValueType::UINT8;
  std::vector<int64_t> ints;        // integer and bool element types
  std::vector<double> floats;       // FLOAT32 / FLOAT64
  std::vector<std::string> strings; // STRING
  std::vector<GgufValue> arrays;    // ARRAY (nested)
  size_t size() const;
};

struct TensorInfo {
  std::string name;
  GgmlType type = GgmlType::F32;
  // Dimensions in GGUF/ggml order: ne[0] is the innermost (contiguous) one.
  // A weight of shape [n_out, n_in] in math terms is stored as ne = {n_in, n_out}.
  std::vector<uint64_t> ne;
  uint64_t offset = 0;        // bytes from the start of the file
  uint64_t n_bytes = 0;       // bytes of data
  const uint8_t* data = nullptr;  // into the mapping

  uint64_t n_elements() const;
  uint64_t n_rows() const { return ne.empty() ? 0 : n_elements() / ne[0]; }
};

class GgufFile {
 public:
  // Maps `path` read-only (advised MADV_HUGEPAGE: uncached pages come in as
  // 2 MiB folios where the kernel and file system allow) and parses it.
  // Throws nexus::Error on any problem (missing file, bad magic, unsupported
  // version, out-of-bounds data, ...).
  explicit GgufFile(const std::string& path);
  // Parses an in-memory image (not copied; must outlive the object). Used by
  // the fuzzer and tests. `name` appears in error messages.
  GgufFile(std::span<const uint8_t> bytes, std::string name);
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t file_size() const { return bytes_.size(); }

  // Metadata in file order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  const GgufValue* find(std::string_view key) const;

  // Typed getters: std::nullopt when the key is absent; nexus::Error when it
  // is present with an incompatible type (a float for an int, ...).
  std::optional<std::string> get_string(std::string_view key) const;
  std::optional<int64_t> get_int(std::string_view key) const;    // any integer type
  std::optional<double> get_float(std::string_view key) const;   // float or integer types
  std::optional<bool> get_bool(std::string_view key) const;
  const GgufArray* get_array(std::string_view key) const;        // nullptr when absent

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;

 private:
  void parse();

  std::string path_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  std::span<const uint8_t> bytes_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::unordered_map<std::string, size_t> kv_index_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
};

// Human-readable one-line rendering of a value (arrays abbreviated), for
// `nexus info`.
std::string gguf_value_to_string(const GgufValue& v, size_t max_array_items = 8);

}  // namespace nexus
