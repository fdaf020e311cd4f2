// GgufWriter: builds GGUF files in memory for tests (valid ones and, through
// the overrides, deliberately broken ones). Header-only.
//
// Layout follows ggml docs/gguf.md: header, kv pairs, tensor infos, padding
// to the alignment, tensor data (each tensor's data padded to the alignment,
// except the last, so that every strict prefix of the file is truncated).
// Version 1 writes u32 counts, lengths and dimensions.
//
//   GgufWriter w;                       // version 3
//   w.kv("llama.block_count", w.u32(2));
//   w.kv("tokenizer.ggml.tokens", w.array(GgufValueType::STRING, {w.str("a"), w.str("b")}));
//   w.tensor({"tok.weight", {64, 8}, GgmlType::F32});
//   std::vector<uint8_t> bytes = w.build();
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/ggml_type.h"
#include "gguf/gguf_file.h"

namespace nexus::test {

class GgufWriter {
 public:
  // An encoded value: its type tag and payload bytes.
  struct Value {
    GgufValueType type;
    std::string bytes;
  };

  struct Tensor {
    std::string name;
    std::vector<uint64_t> ne;  // n_dims = ne.size()
    uint32_t type = 0;         // raw ggml type id (may be unknown, for tests)
    std::optional<uint64_t> offset = std::nullopt;   // relative to the data section; default: laid out in order
    std::optional<std::string> data = std::nullopt;  // default: a byte pattern of the size the shape implies
    Tensor(std::string n, std::vector<uint64_t> dims, GgmlType t) : name(std::move(n)), ne(std::move(dims)),
                                                                    type(static_cast<uint32_t>(t)) {}
    Tensor(std::string n, std::vector<uint64_t> dims, uint32_t t) : name(std::move(n)), ne(std::move(dims)), type(t) {}
  };

  explicit GgufWriter(uint32_t version = 3) : version_(version) {}

  // Header overrides for hostile files.
  std::optional<uint32_t> version_override;
  std::optional<uint64_t> n_tensors_override;
  std::optional<uint64_t> n_kv_override;

  // ---- value encoders ----
  Value u8(uint8_t v) const { return scalar(GgufValueType::UINT8, v); }
  Value i8(int8_t v) const { return scalar(GgufValueType::INT8, v); }
  Value u16(uint16_t v) const { return scalar(GgufValueType::UINT16, v); }
  Value i16(int16_t v) const { return scalar(GgufValueType::INT16, v); }
  Value u32(uint32_t v) const { return scalar(GgufValueType::UINT32, v); }
  Value i32(int32_t v) const { return scalar(GgufValueType::INT32, v); }
  Value u64(uint64_t v) const { return scalar(GgufValueType::UINT64, v); }
  Value i64(int64_t v) const { return scalar(GgufValueType::INT64, v); }
  Value f32(float v) const { return scalar(GgufValueType::FLOAT32, v); }
  Value f64(double v) const { return scalar(GgufValueType::FLOAT64, v); }
  Value boolean(bool v) const { return scalar(GgufValueType::BOOL, static_cast<uint8_t>(v)); }
  Value str(std::string_view s) const { return {GgufValueType::STRING, string_bytes(s)}; }
  // Elements must all be of elem_type (not checked: tests may want it wrong).
  Value array(GgufValueType elem_type, const std::vector<Value>& items) const {
    std::string b = raw(static_cast<uint32_t>(elem_type)) + count(items.size());
    for (const Value& v : items) b += v.bytes;
    return {GgufValueType::ARRAY, b};
  }
  // An array header claiming `n` elements followed by `payload` (hostile counts).
  Value array_raw(uint32_t elem_type, uint64_t n, std::string payload = {}) const {
    return {GgufValueType::ARRAY, raw(elem_type) + count(n) + payload};
  }

  // ---- file contents ----
  void kv(std::string_view key, const Value& v) { kv_raw(key, static_cast<uint32_t>(v.type), v.bytes); }
  void kv_raw(std::string_view key, uint32_t type_id, const std::string& payload) {
    kvs_ += string_bytes(key) + raw(type_id) + payload;
    ++n_kv_;
  }
  void tensor(Tensor t) { tensors_.push_back(std::move(t)); }

  // The byte pattern default tensor data is filled with (byte i of tensor k).
  static uint8_t pattern(size_t k, uint64_t i) { return static_cast<uint8_t>(i * 7 + k * 13 + 1); }

  // Serializes; `alignment` must match any general.alignment kv added.
  std::vector<uint8_t> build(uint64_t alignment = 32) const {
    std::string out = "GGUF" + raw(version_override.value_or(version_));
    out += count(n_tensors_override.value_or(tensors_.size())) + count(n_kv_override.value_or(n_kv_));
    out += kvs_;
    std::vector<std::string> datas;
    uint64_t next = 0;
    for (size_t k = 0; k < tensors_.size(); ++k) {
      const Tensor& t = tensors_[k];
      std::string data = t.data ? *t.data : default_data(k, t);
      const uint64_t off = t.offset.value_or(next);
      next = off + pad_to(data.size(), alignment);
      out += string_bytes(t.name) + raw(static_cast<uint32_t>(t.ne.size()));
      for (uint64_t d : t.ne) out += count(d);
      out += raw(t.type) + raw(off);
      datas.push_back(std::move(data));
    }
    out.append(pad_to(out.size(), alignment) - out.size(), '\0');
    for (size_t k = 0; k < datas.size(); ++k) {
      out += datas[k];
      if (k + 1 < datas.size()) out.append(pad_to(datas[k].size(), alignment) - datas[k].size(), '\0');
    }
    return {out.begin(), out.end()};
  }

  // Little-endian bytes of a trivially copyable value.
  template <class T>
  static std::string raw(T v) {
    std::string b(sizeof(T), '\0');
    std::memcpy(b.data(), &v, sizeof(T));
    return b;
  }
  // A count/length: u32 in v1, u64 otherwise.
  std::string count(uint64_t n) const { return version_ == 1 ? raw(static_cast<uint32_t>(n)) : raw(n); }
  std::string string_bytes(std::string_view s) const { return count(s.size()) + std::string(s); }

 private:
  template <class T>
  Value scalar(GgufValueType t, T v) const { return {t, raw(v)}; }

  static uint64_t pad_to(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

  static std::string default_data(size_t k, const Tensor& t) {
    const GgmlTypeTraits* tr = ggml_type_traits(t.type);
    if (!tr || t.ne.empty()) return {};
    uint64_t n = 1;
    for (uint64_t d : t.ne) n *= d;
    const uint64_t size = n / tr->block_size * tr->type_size;
    if (size > (64u << 20)) return {};  // hostile shapes: no data
    std::string data(size, '\0');
    for (uint64_t i = 0; i < size; ++i) data[i] = static_cast<char>(pattern(k, i));
    return data;
  }

  uint32_t version_;
  uint64_t n_kv_ = 0;
  std::string kvs_;
  std::vector<Tensor> tensors_;
};

}  // namespace nexus::test
