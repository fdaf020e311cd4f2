// GGUF parser. Format: ggml docs/gguf.md (see gguf_file.h for the layout).
//
// Version differences handled here:
//  - v1 (2023-08, before GGUF's first stable release): tensor/kv counts,
//    string lengths, array lengths and tensor dimensions are u32.
//  - v2 and v3: all of those are u64. v3 only added big-endian files, which
//    are recognised (byte-swapped version number) and refused.
#include "gguf/gguf_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "gguf/byte_reader.h"
#include "util/error.h"

namespace nexus {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as little-endian u32
constexpr uint64_t kDefaultAlignment = 32;
constexpr int kMaxArrayDepth = 16;  // nesting bound: keeps recursion (stack) bounded
constexpr uint32_t kMaxDims = 4;    // GGML_MAX_DIMS

// Bytes of a scalar value of type t; 0 for STRING / ARRAY / unknown.
uint64_t scalar_size(GgufValueType t) {
  switch (t) {
    case GgufValueType::UINT8: case GgufValueType::INT8: case GgufValueType::BOOL: return 1;
    case GgufValueType::UINT16: case GgufValueType::INT16: return 2;
    case GgufValueType::UINT32: case GgufValueType::INT32: case GgufValueType::FLOAT32: return 4;
    case GgufValueType::UINT64: case GgufValueType::INT64: case GgufValueType::FLOAT64: return 8;
    default: return 0;
  }
}

class Parser {
 public:
  Parser(ByteReader& r, bool wide) : r_(r), wide_(wide) {}

  GgufValueType read_type(std::string_view what) {
    const uint32_t id = r_.read<uint32_t>();
    if (id > static_cast<uint32_t>(GgufValueType::FLOAT64))
      r_.fail(fmt::format("unknown {} type id {}", what, id));
    return static_cast<GgufValueType>(id);
  }

  // Smallest encoding of one value of type t: bounds hostile element counts.
  uint64_t min_size(GgufValueType t) const {
    const uint64_t count_size = wide_ ? 8 : 4;
    if (t == GgufValueType::STRING) return count_size;
    if (t == GgufValueType::ARRAY) return 4 + count_size;
    return scalar_size(t);
  }

  GgufValue read_value(GgufValueType t, int depth) {
    GgufValue v;
    v.type = t;
    switch (t) {
      case GgufValueType::UINT8: v.v = uint64_t{r_.read<uint8_t>()}; break;
      case GgufValueType::UINT16: v.v = uint64_t{r_.read<uint16_t>()}; break;
      case GgufValueType::UINT32: v.v = uint64_t{r_.read<uint32_t>()}; break;
      case GgufValueType::UINT64: v.v = r_.read<uint64_t>(); break;
      case GgufValueType::INT8: v.v = int64_t{r_.read<int8_t>()}; break;
      case GgufValueType::INT16: v.v = int64_t{r_.read<int16_t>()}; break;
      case GgufValueType::INT32: v.v = int64_t{r_.read<int32_t>()}; break;
      case GgufValueType::INT64: v.v = r_.read<int64_t>(); break;
      case GgufValueType::FLOAT32: v.v = double{r_.read<float>()}; break;
      case GgufValueType::FLOAT64: v.v = r_.read<double>(); break;
      case GgufValueType::BOOL: v.v = read_bool(); break;
      case GgufValueType::STRING: v.v = std::string(r_.read_string(wide_)); break;
      case GgufValueType::ARRAY: v.v = read_array(depth + 1); break;
    }
    return v;
  }

 private:
  bool read_bool() {
    const uint8_t b = r_.read<uint8_t>();
    if (b > 1) r_.fail(fmt::format("invalid bool value {} at byte {} (must be 0 or 1)", b, r_.pos() - 1));
    return b == 1;
  }

  std::shared_ptr<GgufArray> read_array(int depth) {
    if (depth > kMaxArrayDepth) r_.fail(fmt::format("arrays nested deeper than {} levels", kMaxArrayDepth));
    auto a = std::make_shared<GgufArray>();
    a->elem_type = read_type("array element");
    const uint64_t n = r_.read_count(wide_);
    r_.check_count(n, min_size(a->elem_type), "array");
    const size_t count = static_cast<size_t>(n);
    const GgufValueType t = a->elem_type;
    if (t == GgufValueType::STRING) {
      a->strings.reserve(count);
      for (size_t i = 0; i < count; ++i) a->strings.emplace_back(r_.read_string(wide_));
    } else if (t == GgufValueType::ARRAY) {
      a->arrays.reserve(count);
      for (size_t i = 0; i < count; ++i) a->arrays.push_back(read_value(t, depth));
    } else if (t == GgufValueType::FLOAT32 || t == GgufValueType::FLOAT64) {
      a->floats.reserve(count);
      for (size_t i = 0; i < count; ++i)
        a->floats.push_back(t == GgufValueType::FLOAT32 ? double{r_.read<float>()} : r_.read<double>());
    } else {
      a->ints.reserve(count);
      for (size_t i = 0; i < count; ++i) a->ints.push_back(read_int_elem(t));
    }
    return a;
  }

  int64_t read_int_elem(GgufValueType t) {
    switch (t) {
      case GgufValueType::UINT8: return r_.read<uint8_t>();
      case GgufValueType::INT8: return r_.read<int8_t>();
      case GgufValueType::UINT16: return r_.read<uint16_t>();
      case GgufValueType::INT16: return r_.read<int16_t>();
      case GgufValueType::UINT32: return r_.read<uint32_t>();
      case GgufValueType::INT32: return r_.read<int32_t>();
      case GgufValueType::UINT64: return static_cast<int64_t>(r_.read<uint64_t>());  // keeps the bits
      case GgufValueType::INT64: return r_.read<int64_t>();
      case GgufValueType::BOOL: return read_bool() ? 1 : 0;
      default: r_.fail("internal: not an integer array type");
    }
  }

  ByteReader& r_;
  bool wide_;
};

}  // namespace

// ---- construction -----------------------------------------------------------

GgufFile::GgufFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  struct stat st{};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw Error(fmt::format("{}: cannot stat: {}", path, std::strerror(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(fmt::format("{}: not a regular file", path));
  }
  if (st.st_size == 0) {
    ::close(fd);
    throw Error(fmt::format("{}: empty file (0 bytes), not a GGUF model", path));
  }
  map_size_ = static_cast<size_t>(st.st_size);
  void* m = ::mmap(nullptr, map_size_, PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);  // the mapping keeps the file referenced
  if (m == MAP_FAILED) throw Error(fmt::format("{}: mmap failed: {}", path, std::strerror(err)));
  // Ask for 2 MiB pages before anything is read: pages of the file that are
  // not cached yet then come in as 2 MiB folios and are mapped as such
  // (file THP; Linux with large-folio file systems, e.g. ext4 on 6.x). Decode
  // streams every weight once per token, and with 4 KiB pages the TLB misses
  // cost ~10% of it. Advice only: a kernel without file THP ignores it.
  ::madvise(m, map_size_, MADV_HUGEPAGE);
  map_ = m;
  bytes_ = {static_cast<const uint8_t*>(m), map_size_};
  try {
    parse();
  } catch (...) {
    ::munmap(map_, map_size_);  // the destructor does not run for a throwing constructor
    map_ = nullptr;
    throw;
  }
}

GgufFile::GgufFile(std::span<const uint8_t> bytes, std::string name) : path_(std::move(name)), bytes_(bytes) {
  parse();
}

GgufFile::~GgufFile() {
  if (map_) ::munmap(map_, map_size_);
}

// ---- parsing ----------------------------------------------------------------

void GgufFile::parse() {
  ByteReader r(bytes_, path_);
  if (bytes_.empty()) throw Error(fmt::format("{}: empty file (0 bytes), not a GGUF model", path_));
  if (bytes_.size() < 4)
    throw Error(fmt::format("{}: truncated file: {} bytes, too short for the GGUF magic", path_, bytes_.size()));
  if (r.read<uint32_t>() != kMagic)
    throw Error(fmt::format("{}: not a GGUF file (bad magic; expected \"GGUF\")", path_));
  version_ = r.read<uint32_t>();
  if (version_ < 1 || version_ > 3) {
    const uint32_t swapped = __builtin_bswap32(version_);
    if (swapped >= 1 && swapped <= 3)
      throw Error(fmt::format("{}: big-endian GGUF file (version {}) is not supported", path_, swapped));
    throw Error(fmt::format("{}: unsupported GGUF version {} (Nexus reads versions 1, 2 and 3)", path_, version_));
  }
  const bool wide = version_ >= 2;
  const uint64_t count_size = wide ? 8 : 4;
  const uint64_t n_tensors = r.read_count(wide);
  const uint64_t n_kv = r.read_count(wide);
  Parser p(r, wide);

  // A kv pair is at least an empty key, a type and a 1-byte value.
  r.check_count(n_kv, count_size + 4 + 1, "metadata");
  kv_.reserve(static_cast<size_t>(n_kv));
  for (uint64_t i = 0; i < n_kv; ++i) {
    r.set_context(fmt::format("metadata entry {}", i));
    std::string key(r.read_string(wide));
    r.set_context(fmt::format("metadata entry {} ('{}')", i, key));
    const GgufValueType t = p.read_type("metadata value");
    GgufValue v = p.read_value(t, 0);
    if (!kv_index_.emplace(key, kv_.size()).second) r.fail("duplicate metadata key");
    kv_.emplace_back(std::move(key), std::move(v));
  }

  if (const GgufValue* a = find("general.alignment")) {
    uint64_t align = 0;
    if (const auto* u = std::get_if<uint64_t>(&a->v)) align = *u;
    else if (const auto* s = std::get_if<int64_t>(&a->v)) align = *s > 0 ? static_cast<uint64_t>(*s) : 0;
    else
      throw Error(fmt::format("{}: general.alignment has type {}, expected an integer", path_,
                              gguf_value_type_name(a->type)));
    if (align == 0 || (align & (align - 1)) != 0)
      throw Error(fmt::format("{}: general.alignment is {}; it must be a non-zero power of two", path_,
                              gguf_value_to_string(*a)));
    alignment_ = align;
  } else {
    alignment_ = kDefaultAlignment;
  }

  // A tensor info is at least an empty name, n_dims, one dimension, type and offset.
  r.set_context("tensor infos");
  r.check_count(n_tensors, count_size + 4 + count_size + 4 + 8, "tensor");
  tensors_.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    r.set_context(fmt::format("tensor info {}", i));
    TensorInfo ti;
    ti.name = std::string(r.read_string(wide));
    r.set_context(fmt::format("tensor info {} ('{}')", i, ti.name));
    const uint32_t n_dims = r.read<uint32_t>();
    if (n_dims == 0 || n_dims > kMaxDims)
      r.fail(fmt::format("n_dims is {}; must be 1 to {}", n_dims, kMaxDims));
    uint64_t n_elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t ne = r.read_count(wide);
      if (ne == 0) r.fail(fmt::format("dimension {} is 0", d));
      // ggml counts elements in int64: the product must stay below 2^63.
      if (ne > static_cast<uint64_t>(INT64_MAX) / n_elements)
        r.fail("element count overflows 64 bits");
      n_elements *= ne;
      ti.ne.push_back(ne);
    }
    const uint32_t type_id = r.read<uint32_t>();
    const GgmlTypeTraits* traits = ggml_type_traits(type_id);
    if (!traits) r.fail(fmt::format("unknown ggml tensor type id {}", type_id));
    ti.type = static_cast<GgmlType>(type_id);
    const uint64_t rel_offset = r.read<uint64_t>();
    if (ti.ne[0] % traits->block_size != 0)
      r.fail(fmt::format("row length {} is not a multiple of the {} block size {}", ti.ne[0], traits->name,
                         traits->block_size));
    const uint64_t n_blocks = n_elements / traits->block_size;
    if (n_blocks > UINT64_MAX / traits->type_size) r.fail("data size overflows 64 bits");
    ti.n_bytes = n_blocks * traits->type_size;
    if (rel_offset % alignment_ != 0)
      r.fail(fmt::format("data offset {} is not a multiple of the alignment {}", rel_offset, alignment_));
    ti.offset = rel_offset;  // made absolute below, once the data section start is known
    if (!tensor_index_.emplace(ti.name, tensors_.size()).second) r.fail("duplicate tensor name");
    tensors_.push_back(std::move(ti));
  }

  // The data section starts at the first aligned offset after the header. A
  // file without tensors (a vocab-only file) may end before that padding.
  const uint64_t header_end = r.pos();
  const uint64_t size = bytes_.size();
  const uint64_t pad = (alignment_ - header_end % alignment_) % alignment_;
  if (tensors_.empty()) return;
  if (pad > size - header_end)
    throw Error(fmt::format("{}: truncated file: the tensor data section starts at byte {} but the file has {} bytes",
                            path_, header_end + pad, size));
  const uint64_t data_start = header_end + pad;
  const uint64_t data_size = size - data_start;
  for (TensorInfo& ti : tensors_) {
    if (ti.offset > data_size || ti.n_bytes > data_size - ti.offset)
      throw Error(fmt::format(
          "{}: truncated file: tensor '{}' ({} bytes at data offset {}) ends past byte {}, the end of the file",
          path_, ti.name, ti.n_bytes, ti.offset, size));
    ti.offset += data_start;
    ti.data = bytes_.data() + ti.offset;
  }
}

// ---- lookups ----------------------------------------------------------------

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = kv_index_.find(std::string(key));
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const TensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {
[[noreturn]] void type_mismatch(const std::string& path, std::string_view key, const GgufValue& v,
                                std::string_view wanted) {
  throw Error(fmt::format("{}: metadata '{}' has type {}, expected {}", path, key, gguf_value_type_name(v.type),
                          wanted));
}
}  // namespace

std::optional<std::string> GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (const auto* s = std::get_if<std::string>(&v->v)) return *s;
  type_mismatch(path_, key, *v, "a string");
}

std::optional<int64_t> GgufFile::get_int(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (const auto* i = std::get_if<int64_t>(&v->v)) return *i;
  if (const auto* u = std::get_if<uint64_t>(&v->v)) {
    if (*u > static_cast<uint64_t>(INT64_MAX))
      throw Error(fmt::format("{}: metadata '{}' value {} is out of range", path_, key, *u));
    return static_cast<int64_t>(*u);
  }
  type_mismatch(path_, key, *v, "an integer");
}

std::optional<double> GgufFile::get_float(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (const auto* d = std::get_if<double>(&v->v)) return *d;
  if (const auto* i = std::get_if<int64_t>(&v->v)) return static_cast<double>(*i);
  if (const auto* u = std::get_if<uint64_t>(&v->v)) return static_cast<double>(*u);
  type_mismatch(path_, key, *v, "a number");
}

std::optional<bool> GgufFile::get_bool(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (const auto* b = std::get_if<bool>(&v->v)) return *b;
  type_mismatch(path_, key, *v, "a bool");
}

const GgufArray* GgufFile::get_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return nullptr;
  if (const auto* a = std::get_if<std::shared_ptr<GgufArray>>(&v->v)) return a->get();
  type_mismatch(path_, key, *v, "an array");
}

uint64_t TensorInfo::n_elements() const {
  uint64_t n = 1;
  for (uint64_t d : ne) n *= d;  // checked against overflow when parsed
  return n;
}

}  // namespace nexus
