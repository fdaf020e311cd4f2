// ByteReader: bounds-checked little-endian reads from an in-memory byte span,
// used by the GGUF parser.
//
// Every read first checks that the bytes are there; a short read throws
// nexus::Error "<name>: truncated file: <context> extends to byte X but the
// file has Y bytes", where <context> is what the parser is reading (set with
// set_context, e.g. "tensor info 3"). Offsets are computed without overflow,
// so hostile lengths near 2^64 are reported, never wrapped.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include <fmt/format.h>

#include "util/error.h"

namespace nexus {

// GGUF is little-endian; a big-endian host would need byte swapping here.
static_assert(std::endian::native == std::endian::little, "Nexus reads GGUF on little-endian hosts only");

class ByteReader {
 public:
  ByteReader(std::span<const uint8_t> bytes, const std::string& name) : bytes_(bytes), name_(name) {}

  uint64_t pos() const { return pos_; }
  uint64_t size() const { return bytes_.size(); }
  uint64_t remaining() const { return bytes_.size() - pos_; }

  // What is being read, for error messages ("metadata entry 4 ('llama.block_count')").
  void set_context(std::string ctx) { context_ = std::move(ctx); }
  const std::string& context() const { return context_; }

  // Throws "<name>: <msg>" with the current context prepended.
  [[noreturn]] void fail(const std::string& msg) const {
    throw Error(fmt::format("{}: {}: {}", name_, context_, msg));
  }

  // Ensures n more bytes are present.
  void need(uint64_t n) const {
    if (n <= remaining()) return;
    // pos_ + n may exceed 2^64 for hostile lengths: saturate instead of wrapping.
    const uint64_t end = n > std::numeric_limits<uint64_t>::max() - pos_
                             ? std::numeric_limits<uint64_t>::max()
                             : pos_ + n;
    throw Error(fmt::format("{}: truncated file: {} extends to byte {} but the file has {} bytes",
                            name_, context_, end, bytes_.size()));
  }

  template <class T>
  T read() {
    static_assert(std::is_trivially_copyable_v<T>);
    need(sizeof(T));
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));  // unaligned-safe
    pos_ += sizeof(T);
    return v;
  }

  // A count or length: u64 in GGUF v2+, u32 in v1.
  uint64_t read_count(bool wide) { return wide ? read<uint64_t>() : read<uint32_t>(); }

  // A GGUF string (length + bytes, no terminator), viewing the input.
  std::string_view read_string(bool wide) {
    const uint64_t len = read_count(wide);
    if (len > remaining())
      throw Error(fmt::format(
          "{}: truncated file: {} has a string of {} bytes at byte {} but only {} bytes are left",
          name_, context_, len, pos_, remaining()));
    std::string_view s(reinterpret_cast<const char*>(bytes_.data() + pos_), static_cast<size_t>(len));
    pos_ += len;
    return s;
  }

  // Checks that `count` elements of at least `min_size` bytes each could fit in
  // the rest of the file, before anything is allocated for them.
  void check_count(uint64_t count, uint64_t min_size, std::string_view what) const {
    if (min_size != 0 && count > remaining() / min_size)
      throw Error(fmt::format(
          "{}: truncated or corrupt file: {}: {} count {} needs at least {} bytes per entry but only {} bytes "
          "are left (at byte {})",
          name_, context_, what, count, min_size, remaining(), pos_));
  }

 private:
  std::span<const uint8_t> bytes_;
  const std::string& name_;
  uint64_t pos_ = 0;
  std::string context_ = "header";
};

}  // namespace nexus
