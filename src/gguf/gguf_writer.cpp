#include "gguf/gguf_writer.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "util/error.h"

namespace nexus {
namespace {

static_assert(std::endian::native == std::endian::little, "GGUF is written little-endian: host must be too");

constexpr uint32_t kVersion = 3;
constexpr int kMaxArrayDepth = 16;  // the reader's nesting bound; deeper arrays could not be read back
constexpr size_t kMaxDims = 4;      // GGML_MAX_DIMS

bool is_int_type(GgufValueType t) {
  switch (t) {
    case GgufValueType::UINT8: case GgufValueType::INT8: case GgufValueType::UINT16: case GgufValueType::INT16:
    case GgufValueType::UINT32: case GgufValueType::INT32: case GgufValueType::UINT64: case GgufValueType::INT64:
    case GgufValueType::BOOL:
      return true;
    default:
      return false;
  }
}

bool is_float_type(GgufValueType t) { return t == GgufValueType::FLOAT32 || t == GgufValueType::FLOAT64; }

bool valid_type(GgufValueType t) { return static_cast<uint32_t>(t) <= static_cast<uint32_t>(GgufValueType::FLOAT64); }

// Range of an integer type as [lo, hi] in int64 (UINT64 is handled apart).
std::pair<int64_t, int64_t> int_range(GgufValueType t) {
  switch (t) {
    case GgufValueType::UINT8: return {0, 0xff};
    case GgufValueType::INT8: return {-128, 127};
    case GgufValueType::UINT16: return {0, 0xffff};
    case GgufValueType::INT16: return {-32768, 32767};
    case GgufValueType::UINT32: return {0, 0xffffffffLL};
    case GgufValueType::INT32: return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
    case GgufValueType::BOOL: return {0, 1};
    default: return {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
  }
}

class Encoder {
 public:
  std::vector<uint8_t> bytes;

  template <class T>
  void put(T v) {
    const size_t n = bytes.size();
    bytes.resize(n + sizeof(T));
    std::memcpy(bytes.data() + n, &v, sizeof(T));
  }
  void put_string(std::string_view s) {
    put<uint64_t>(s.size());
    bytes.insert(bytes.end(), s.begin(), s.end());
  }
  // An integer of type t; `bits` is the value (UINT64: its bit pattern).
  void put_int(GgufValueType t, int64_t bits) {
    switch (t) {
      case GgufValueType::UINT8: case GgufValueType::BOOL: put<uint8_t>(static_cast<uint8_t>(bits)); break;
      case GgufValueType::INT8: put<int8_t>(static_cast<int8_t>(bits)); break;
      case GgufValueType::UINT16: put<uint16_t>(static_cast<uint16_t>(bits)); break;
      case GgufValueType::INT16: put<int16_t>(static_cast<int16_t>(bits)); break;
      case GgufValueType::UINT32: put<uint32_t>(static_cast<uint32_t>(bits)); break;
      case GgufValueType::INT32: put<int32_t>(static_cast<int32_t>(bits)); break;
      default: put<int64_t>(bits); break;  // UINT64 / INT64: same bytes
    }
  }
  void put_float(GgufValueType t, double d) {
    if (t == GgufValueType::FLOAT32) put<float>(static_cast<float>(d));
    else put<double>(d);
  }
  // The value's payload (no type tag: the caller wrote it).
  void put_value(const GgufValue& v) {
    if (is_int_type(v.type) && v.type != GgufValueType::BOOL) {
      const auto* u = std::get_if<uint64_t>(&v.v);
      put_int(v.type, u ? static_cast<int64_t>(*u) : std::get<int64_t>(v.v));
    } else if (v.type == GgufValueType::BOOL) {
      put<uint8_t>(std::get<bool>(v.v) ? 1 : 0);
    } else if (is_float_type(v.type)) {
      put_float(v.type, std::get<double>(v.v));
    } else if (v.type == GgufValueType::STRING) {
      put_string(std::get<std::string>(v.v));
    } else {
      const GgufArray& a = *std::get<std::shared_ptr<GgufArray>>(v.v);
      put<uint32_t>(static_cast<uint32_t>(a.elem_type));
      put<uint64_t>(a.size());
      if (a.elem_type == GgufValueType::STRING)
        for (const std::string& s : a.strings) put_string(s);
      else if (a.elem_type == GgufValueType::ARRAY)
        for (const GgufValue& e : a.arrays) put_value(e);
      else if (is_float_type(a.elem_type))
        for (double d : a.floats) put_float(a.elem_type, d);
      else
        for (int64_t i : a.ints) put_int(a.elem_type, i);
    }
  }
};

// Checks that v can be written as its declared type; throws naming `key`.
void validate(const GgufValue& v, const std::string& key, int depth) {
  auto fail = [&](const std::string& msg) { throw Error("GGUF writer: metadata '" + key + "': " + msg); };
  if (!valid_type(v.type)) fail(fmt::format("unknown value type {}", static_cast<uint32_t>(v.type)));
  const std::string tname(gguf_value_type_name(v.type));
  if (v.type == GgufValueType::BOOL) {
    if (!std::holds_alternative<bool>(v.v)) fail("BOOL value does not hold a bool");
  } else if (is_int_type(v.type)) {
    const auto [lo, hi] = int_range(v.type);
    if (const auto* u = std::get_if<uint64_t>(&v.v)) {
      if (v.type != GgufValueType::UINT64 && *u > static_cast<uint64_t>(hi))
        fail(fmt::format("{} does not fit in {}", *u, tname));
    } else if (const auto* i = std::get_if<int64_t>(&v.v)) {
      if (*i < lo || *i > hi || (v.type == GgufValueType::UINT64 && *i < 0))
        fail(fmt::format("{} does not fit in {}", *i, tname));
    } else {
      fail(tname + " value does not hold an integer");
    }
  } else if (is_float_type(v.type)) {
    if (!std::holds_alternative<double>(v.v)) fail(tname + " value does not hold a floating-point number");
  } else if (v.type == GgufValueType::STRING) {
    if (!std::holds_alternative<std::string>(v.v)) fail("STRING value does not hold a string");
  } else {
    const auto* ap = std::get_if<std::shared_ptr<GgufArray>>(&v.v);
    if (!ap || !*ap) fail("ARRAY value does not hold an array");
    if (depth >= kMaxArrayDepth) fail(fmt::format("arrays nested deeper than {} levels", kMaxArrayDepth));
    const GgufArray& a = **ap;
    const GgufValueType et = a.elem_type;
    if (!valid_type(et)) fail(fmt::format("unknown array element type {}", static_cast<uint32_t>(et)));
    // Exactly the vector that matches elem_type may hold elements.
    const bool ints_ok = is_int_type(et), floats_ok = is_float_type(et);
    const bool strings_ok = et == GgufValueType::STRING, arrays_ok = et == GgufValueType::ARRAY;
    if ((!ints_ok && !a.ints.empty()) || (!floats_ok && !a.floats.empty()) ||
        (!strings_ok && !a.strings.empty()) || (!arrays_ok && !a.arrays.empty()))
      fail("array elements do not match its element type " + std::string(gguf_value_type_name(et)));
    if (ints_ok && et != GgufValueType::UINT64) {
      const auto [lo, hi] = int_range(et);
      for (int64_t i : a.ints)
        if (i < lo || i > hi) fail(fmt::format("array element {} does not fit in {}", i, gguf_value_type_name(et)));
    }
    for (const GgufValue& e : a.arrays) {
      if (e.type != GgufValueType::ARRAY) fail("an element of an array of arrays is not an array");
      validate(e, key, depth + 1);
    }
  }
}

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

std::shared_ptr<GgufArray> make_array(GgufValueType t) {
  auto a = std::make_shared<GgufArray>();
  a->elem_type = t;
  return a;
}

}  // namespace

GgufWriter::GgufWriter(uint32_t alignment) : alignment_(alignment) {
  if (alignment == 0 || !std::has_single_bit(alignment))
    throw Error(fmt::format("GGUF writer: alignment {} is not a power of two", alignment));
}

void GgufWriter::set(std::string key, GgufValue value) {
  if (key.empty()) throw Error("GGUF writer: empty metadata key");
  if (key == "general.alignment") throw Error("GGUF writer: general.alignment is set by the writer's alignment");
  if (keys_.count(key)) throw Error("GGUF writer: metadata key '" + key + "' set twice");
  validate(value, key, 0);
  keys_.insert(key);
  kv_.emplace_back(std::move(key), std::move(value));
}

void GgufWriter::set_u8(std::string k, uint8_t v) { set(std::move(k), {GgufValueType::UINT8, uint64_t{v}}); }
void GgufWriter::set_i8(std::string k, int8_t v) { set(std::move(k), {GgufValueType::INT8, int64_t{v}}); }
void GgufWriter::set_u16(std::string k, uint16_t v) { set(std::move(k), {GgufValueType::UINT16, uint64_t{v}}); }
void GgufWriter::set_i16(std::string k, int16_t v) { set(std::move(k), {GgufValueType::INT16, int64_t{v}}); }
void GgufWriter::set_u32(std::string k, uint32_t v) { set(std::move(k), {GgufValueType::UINT32, uint64_t{v}}); }
void GgufWriter::set_i32(std::string k, int32_t v) { set(std::move(k), {GgufValueType::INT32, int64_t{v}}); }
void GgufWriter::set_u64(std::string k, uint64_t v) { set(std::move(k), {GgufValueType::UINT64, v}); }
void GgufWriter::set_i64(std::string k, int64_t v) { set(std::move(k), {GgufValueType::INT64, v}); }
void GgufWriter::set_f32(std::string k, float v) { set(std::move(k), {GgufValueType::FLOAT32, double{v}}); }
void GgufWriter::set_f64(std::string k, double v) { set(std::move(k), {GgufValueType::FLOAT64, v}); }
void GgufWriter::set_bool(std::string k, bool v) { set(std::move(k), {GgufValueType::BOOL, v}); }
void GgufWriter::set_string(std::string k, std::string v) {
  set(std::move(k), {GgufValueType::STRING, std::move(v)});
}

void GgufWriter::set_int_array(std::string key, GgufValueType elem_type, std::vector<int64_t> v) {
  if (!is_int_type(elem_type)) throw Error("GGUF writer: metadata '" + key + "': not an integer element type");
  auto a = make_array(elem_type);
  a->ints = std::move(v);
  set(std::move(key), {GgufValueType::ARRAY, std::move(a)});
}

void GgufWriter::set_float_array(std::string key, GgufValueType elem_type, std::vector<double> v) {
  if (!is_float_type(elem_type)) throw Error("GGUF writer: metadata '" + key + "': not a float element type");
  auto a = make_array(elem_type);
  a->floats = std::move(v);
  set(std::move(key), {GgufValueType::ARRAY, std::move(a)});
}

void GgufWriter::set_string_array(std::string key, std::vector<std::string> v) {
  auto a = make_array(GgufValueType::STRING);
  a->strings = std::move(v);
  set(std::move(key), {GgufValueType::ARRAY, std::move(a)});
}

size_t GgufWriter::add_tensor(std::string name, GgmlType type, std::vector<uint64_t> ne) {
  auto fail = [&](const std::string& msg) { throw Error("GGUF writer: tensor '" + name + "': " + msg); };
  if (name.empty()) throw Error("GGUF writer: empty tensor name");
  if (names_.count(name)) fail("declared twice");
  const GgmlTypeTraits* traits = ggml_type_traits(static_cast<uint32_t>(type));
  if (!traits) fail(fmt::format("unknown ggml type {}", static_cast<uint32_t>(type)));
  if (ne.empty() || ne.size() > kMaxDims) fail(fmt::format("{} dimensions (1 to {} allowed)", ne.size(), kMaxDims));
  uint64_t n_rows = 1;
  constexpr uint64_t kLimit = uint64_t{1} << 50;  // far above any real tensor; keeps the byte math exact
  for (size_t d = 0; d < ne.size(); ++d) {
    if (ne[d] == 0 || ne[d] > kLimit) fail(fmt::format("dimension {} is {}", d, ne[d]));
    if (d > 0) {
      n_rows *= ne[d];
      if (n_rows > kLimit) fail("too many elements");
    }
  }
  if (ne[0] % traits->block_size != 0)
    fail(fmt::format("ne[0] = {} is not a multiple of the {} block size {}", ne[0], traits->name, traits->block_size));
  const uint64_t row_bytes = ggml_row_size(type, ne[0]);
  if (row_bytes > kLimit / n_rows) fail("too many bytes");
  Tensor t{std::move(name), type, std::move(ne), row_bytes * n_rows, data_size_};
  data_size_ = align_up(t.offset + t.n_bytes, alignment_);
  names_.insert(t.name);
  tensors_.push_back(std::move(t));
  return tensors_.size() - 1;
}

std::vector<uint8_t> GgufWriter::header_bytes() const {
  Encoder e;
  e.put<uint8_t>('G'); e.put<uint8_t>('G'); e.put<uint8_t>('U'); e.put<uint8_t>('F');
  e.put<uint32_t>(kVersion);
  e.put<uint64_t>(tensors_.size());
  e.put<uint64_t>(kv_.size() + 1);  // + general.alignment
  for (const auto& [key, value] : kv_) {
    e.put_string(key);
    e.put<uint32_t>(static_cast<uint32_t>(value.type));
    e.put_value(value);
  }
  e.put_string("general.alignment");
  e.put<uint32_t>(static_cast<uint32_t>(GgufValueType::UINT32));
  e.put<uint32_t>(alignment_);
  for (const Tensor& t : tensors_) {
    e.put_string(t.name);
    e.put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
    for (uint64_t d : t.ne) e.put<uint64_t>(d);
    e.put<uint32_t>(static_cast<uint32_t>(t.type));
    e.put<uint64_t>(t.offset);
  }
  e.bytes.resize(align_up(e.bytes.size(), alignment_), 0);
  return std::move(e.bytes);
}

uint64_t GgufWriter::file_size() const { return header_bytes().size() + data_size_; }

void GgufWriter::serialize(const Sink& out, const FillFn& fill) const {
  const std::vector<uint8_t> header = header_bytes();
  out(header.data(), header.size());
  uint64_t max_bytes = 0;
  for (const Tensor& t : tensors_) max_bytes = std::max(max_bytes, t.n_bytes);
  // One buffer, reused: memory is the largest tensor, not the model.
  std::vector<uint8_t> buf(static_cast<size_t>(max_bytes));
  const std::vector<uint8_t> zeros(alignment_, 0);
  uint64_t pos = 0;  // within the data section
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const Tensor& t = tensors_[i];
    const std::span<uint8_t> dst(buf.data(), static_cast<size_t>(t.n_bytes));
    fill(i, dst);
    out(dst.data(), dst.size());
    pos += t.n_bytes;
    const uint64_t pad = align_up(pos, alignment_) - pos;
    out(zeros.data(), static_cast<size_t>(pad));
    pos += pad;
  }
}

std::vector<uint8_t> GgufWriter::write_to_memory(const FillFn& fill) const {
  std::vector<uint8_t> bytes;
  bytes.reserve(static_cast<size_t>(file_size()));
  serialize([&](const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    bytes.insert(bytes.end(), b, b + n);
  }, fill);
  return bytes;
}

void GgufWriter::write(const std::string& path, const FillFn& fill) const {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw Error(fmt::format("{}: cannot create: {}", tmp, std::strerror(errno)));
  try {
    serialize([&](const void* p, size_t n) {
      if (n && std::fwrite(p, 1, n, f) != n) throw Error(fmt::format("{}: write failed: {}", tmp, std::strerror(errno)));
    }, fill);
    const int rc = std::fclose(f);
    f = nullptr;
    if (rc != 0) throw Error(fmt::format("{}: write failed: {}", tmp, std::strerror(errno)));
    if (std::rename(tmp.c_str(), path.c_str()) != 0)
      throw Error(fmt::format("{}: cannot rename to {}: {}", tmp, path, std::strerror(errno)));
  } catch (...) {
    if (f) std::fclose(f);
    std::remove(tmp.c_str());
    throw;
  }
}

}  // namespace nexus
