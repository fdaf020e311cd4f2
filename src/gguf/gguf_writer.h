// GgufWriter: writes a GGUF version 3 file (metadata + tensors).
//
// Source: the GGUF specification (ggml docs/gguf.md). The file written is
//   "GGUF" | u32 3 | u64 n_tensors | u64 n_kv
//   n_kv x (string key, u32 value type, value)        in the order they were set,
//                                                       then general.alignment (u32)
//   n_tensors x (string name, u32 n_dims, n_dims x u64 ne, u32 ggml type,
//                u64 offset from the start of the data section)
//   zero padding to the alignment | tensor data, each tensor starting at a
//   multiple of the alignment and followed by zero padding up to the next one.
// All numbers are little-endian; strings are u64 length + bytes, no NUL.
//
// Metadata values are the reader's GgufValue (gguf_file.h), so a value read
// from one file can be written to another unchanged: `type` (and, for arrays,
// `elem_type`) say how it is stored; integers are narrowed to that type and a
// value that does not fit throws nexus::Error when it is set.
//
// Tensor data is streamed: write() asks a callback for one tensor at a time
// and writes it before asking for the next, so memory use is one tensor, not
// the model. The file appears under its final name only when it is complete
// (written to "<path>.tmp", then renamed).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "gguf/ggml_type.h"
#include "gguf/gguf_file.h"

namespace nexus {

class GgufWriter {
 public:
  // alignment: bytes, a power of two (GGUF's default and ggml's is 32); it is
  // written as general.alignment. Throws nexus::Error otherwise.
  explicit GgufWriter(uint32_t alignment = 32);

  // Metadata. Each key may be set once (nexus::Error on a repeat, an empty
  // key, or general.alignment, which the writer owns).
  void set(std::string key, GgufValue value);
  void set_u8(std::string key, uint8_t v);
  void set_i8(std::string key, int8_t v);
  void set_u16(std::string key, uint16_t v);
  void set_i16(std::string key, int16_t v);
  void set_u32(std::string key, uint32_t v);
  void set_i32(std::string key, int32_t v);
  void set_u64(std::string key, uint64_t v);
  void set_i64(std::string key, int64_t v);
  void set_f32(std::string key, float v);
  void set_f64(std::string key, double v);
  void set_bool(std::string key, bool v);
  void set_string(std::string key, std::string v);
  // Arrays: integers (elem_type one of the integer types or BOOL), floats
  // (FLOAT32 / FLOAT64), strings.
  void set_int_array(std::string key, GgufValueType elem_type, std::vector<int64_t> v);
  void set_float_array(std::string key, GgufValueType elem_type, std::vector<double> v);
  void set_string_array(std::string key, std::vector<std::string> v);

  // Declares a tensor. ne is in ggml order (ne[0] innermost, contiguous): a
  // math [n_rows, n_cols] matrix is ne = {n_cols, n_rows}. 1 to 4 dims, each
  // >= 1; ne[0] must be a multiple of the type's block size. Returns the
  // tensor's index (declaration order = file order). nexus::Error on a
  // repeated or empty name, an unknown type or a bad shape.
  size_t add_tensor(std::string name, GgmlType type, std::vector<uint64_t> ne);

  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<uint64_t> ne;
    uint64_t n_bytes;  // data bytes (without padding)
    uint64_t offset;   // from the start of the data section, a multiple of the alignment
  };
  const std::vector<Tensor>& tensors() const { return tensors_; }

  // Fills `dst` (exactly tensors()[index].n_bytes bytes) with the tensor's
  // data. Called once per tensor, in order. Exceptions propagate out of write().
  using FillFn = std::function<void(size_t index, std::span<uint8_t> dst)>;

  // Writes the file. Throws nexus::Error on an I/O error (naming the path);
  // then no file is left under `path`.
  void write(const std::string& path, const FillFn& fill) const;
  // The same bytes, in memory (for tests and small files).
  std::vector<uint8_t> write_to_memory(const FillFn& fill) const;

  // Size of the file write() produces, in bytes.
  uint64_t file_size() const;

 private:
  using Sink = std::function<void(const void* data, size_t n)>;
  void serialize(const Sink& out, const FillFn& fill) const;
  std::vector<uint8_t> header_bytes() const;

  uint32_t alignment_;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<Tensor> tensors_;
  std::unordered_set<std::string> keys_, names_;
  uint64_t data_size_ = 0;  // data section bytes, padding included
};

}  // namespace nexus
