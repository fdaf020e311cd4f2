// GgufFile on hostile and corrupt inputs: each must throw nexus::Error with a
// message naming the problem (never crash, read out of bounds, or allocate
// memory a count claims but the file cannot hold; ASan checks the latter two).
#include <gtest/gtest.h>

#include <limits>

#include "gguf/gguf_file.h"
#include "support/gguf_writer.h"
#include "util/error.h"

namespace nexus {
namespace {

using test::GgufWriter;
using VT = GgufValueType;
using Bytes = std::vector<uint8_t>;
constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();

std::string parse_error(const Bytes& bytes) {
  try {
    GgufFile f(std::span<const uint8_t>(bytes), "mem.gguf");
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

#define EXPECT_PARSE_ERROR(bytes, substr)                    \
  do {                                                       \
    const std::string msg_ = parse_error(bytes);             \
    EXPECT_NE(msg_, "") << "parsed, expected an error";      \
    EXPECT_NE(msg_.find(substr), std::string::npos) << msg_; \
  } while (0)

GgufWriter small_writer(uint32_t version) {
  GgufWriter w(version);
  w.kv("general.architecture", w.str("llama"));
  w.kv("a.u32", w.u32(7));
  w.kv("a.f64", w.f64(0.5));
  w.kv("a.bool", w.boolean(false));
  w.kv("a.strs", w.array(VT::STRING, {w.str("x"), w.str("yz")}));
  w.kv("a.nested", w.array(VT::ARRAY, {w.array(VT::INT16, {w.i16(-1)})}));
  w.tensor({"w", {8, 2}, GgmlType::F32});
  w.tensor({"q", {32}, GgmlType::Q4_0});
  return w;
}

// A file with one tensor `t` whose info fields are given.
Bytes one_tensor(GgufWriter::Tensor t, uint64_t alignment = 32) {
  GgufWriter w;
  w.tensor(std::move(t));
  return w.build(alignment);
}

TEST(GgufHostile, TruncationAtEveryByteThrows) {
  for (uint32_t version : {1u, 2u, 3u}) {
    const Bytes full = small_writer(version).build();
    ASSERT_EQ(parse_error(full), "");
    for (size_t len = 0; len < full.size(); ++len) {
      const Bytes cut(full.begin(), full.begin() + len);
      const std::string msg = parse_error(cut);
      ASSERT_NE(msg, "") << "v" << version << " prefix of " << len << " bytes parsed";
      const char* want = len == 0 ? "empty file" : "truncated";
      ASSERT_NE(msg.find(want), std::string::npos) << "v" << version << " len " << len << ": " << msg;
    }
  }
}

TEST(GgufHostile, TruncationMessageNamesItemAndSizes) {
  GgufWriter w;
  w.tensor({"first", {4}, GgmlType::F32});
  w.tensor({"second_tensor_with_a_long_name", {4}, GgmlType::F32});
  const Bytes full = w.build();
  // Header 24 bytes; tensor info 0: 8+5 name, 4 n_dims, 8 dim, 4 type, 8 offset = 37 bytes.
  // Cut 6 bytes into tensor info 1's first dimension (name 8+30, n_dims 4).
  const Bytes cut(full.begin(), full.begin() + 24 + 37 + 38 + 4 + 2);
  EXPECT_EQ(parse_error(cut),
            "mem.gguf: truncated file: tensor info 1 ('second_tensor_with_a_long_name') extends to byte 111 but the "
            "file has 105 bytes");
}

TEST(GgufHostile, BadMagicAndVersions) {
  Bytes b = small_writer(3).build();
  Bytes bad = b;
  bad[3] = 'X';
  EXPECT_PARSE_ERROR(bad, "mem.gguf: not a GGUF file (bad magic");
  EXPECT_PARSE_ERROR(Bytes({'G', 'G'}), "too short for the GGUF magic");
  for (uint32_t v : {0u, 4u, 0xFFFFFFFFu}) {
    GgufWriter w;
    w.version_override = v;
    EXPECT_PARSE_ERROR(w.build(), "unsupported GGUF version " + std::to_string(v));
  }
  GgufWriter be;
  be.version_override = 0x03000000u;  // a big-endian v3 file
  EXPECT_PARSE_ERROR(be.build(), "big-endian GGUF file (version 3)");
}

TEST(GgufHostile, HugeCountsAreRefusedBeforeAllocating) {
  GgufWriter w = small_writer(3);
  w.n_kv_override = uint64_t{1} << 63;
  EXPECT_PARSE_ERROR(w.build(), "metadata count 9223372036854775808 needs at least");
  GgufWriter t = small_writer(3);
  t.n_tensors_override = kU64Max;
  EXPECT_PARSE_ERROR(t.build(), "tensor count 18446744073709551615");
  GgufWriter v1 = small_writer(1);
  v1.n_kv_override = 0xFFFFFFFFu;
  EXPECT_PARSE_ERROR(v1.build(), "metadata count 4294967295");

  const std::pair<uint32_t, uint64_t> arrays[] = {
      {static_cast<uint32_t>(VT::UINT64), uint64_t{1} << 62}, {static_cast<uint32_t>(VT::STRING), kU64Max},
      {static_cast<uint32_t>(VT::ARRAY), uint64_t{1} << 60}, {static_cast<uint32_t>(VT::UINT8), 1000}};
  for (auto [elem, n] : arrays) {
    GgufWriter a;
    a.kv("big", a.array_raw(elem, n, std::string(64, '\0')));
    EXPECT_PARSE_ERROR(a.build(), "metadata entry 0 ('big'): array count " + std::to_string(n));
  }
}

TEST(GgufHostile, HugeStringLengths) {
  GgufWriter w;
  w.kv_raw("s", static_cast<uint32_t>(VT::STRING), GgufWriter::raw(kU64Max) + "abc");
  EXPECT_PARSE_ERROR(w.build(), "has a string of 18446744073709551615 bytes");
  // A key whose length runs past the end.
  Bytes b = GgufWriter().build();
  b.resize(24);  // header only
  b[16] = 1;     // n_kv = 1
  for (int i = 0; i < 16; ++i) b.push_back(0xFF);
  EXPECT_EQ(parse_error(b),
            "mem.gguf: truncated file: metadata entry 0 has a string of 18446744073709551615 bytes at byte 32 but "
            "only 8 bytes are left");
}

TEST(GgufHostile, BadValueTypes) {
  GgufWriter w;
  w.kv_raw("x", 13, std::string(8, '\0'));
  EXPECT_PARSE_ERROR(w.build(), "metadata entry 0 ('x'): unknown metadata value type id 13");
  GgufWriter a;
  a.kv("arr", a.array_raw(99, 1, std::string(8, '\0')));
  EXPECT_PARSE_ERROR(a.build(), "unknown array element type id 99");
  GgufWriter b;
  b.kv_raw("flag", static_cast<uint32_t>(VT::BOOL), std::string(1, '\x02'));
  EXPECT_PARSE_ERROR(b.build(), "('flag'): invalid bool value 2");
}

TEST(GgufHostile, DeepNestingIsBounded) {
  auto nested = [](int depth) {
    GgufWriter w;
    GgufWriter::Value v = w.array(VT::UINT8, {w.u8(1)});
    for (int i = 1; i < depth; ++i) v = w.array(VT::ARRAY, {v});
    w.kv("deep", v);
    return w.build();
  };
  EXPECT_EQ(parse_error(nested(16)), "");
  EXPECT_PARSE_ERROR(nested(17), "arrays nested deeper than 16 levels");
  EXPECT_PARSE_ERROR(nested(5000), "arrays nested deeper than 16 levels");
}

TEST(GgufHostile, Duplicates) {
  GgufWriter w;
  w.kv("k", w.u8(1));
  w.kv("k", w.u8(2));
  EXPECT_PARSE_ERROR(w.build(), "metadata entry 1 ('k'): duplicate metadata key");
  GgufWriter t;
  t.tensor({"w", {4}, GgmlType::F32});
  t.tensor({"w", {4}, GgmlType::F32});
  EXPECT_PARSE_ERROR(t.build(), "tensor info 1 ('w'): duplicate tensor name");
}

TEST(GgufHostile, BadAlignment) {
  for (uint32_t a : {0u, 3u, 48u}) {
    GgufWriter w;
    w.kv("general.alignment", w.u32(a));
    EXPECT_PARSE_ERROR(w.build(), "general.alignment is " + std::to_string(a) + "; it must be a non-zero power of two");
  }
  GgufWriter neg;
  neg.kv("general.alignment", neg.i32(-64));
  EXPECT_PARSE_ERROR(neg.build(), "must be a non-zero power of two");
  GgufWriter s;
  s.kv("general.alignment", s.str("32"));
  EXPECT_PARSE_ERROR(s.build(), "general.alignment has type STRING, expected an integer");
}

TEST(GgufHostile, BadTensorShapes) {
  EXPECT_PARSE_ERROR(one_tensor({"t5", {2, 2, 2, 2, 2}, GgmlType::F32}), "tensor info 0 ('t5'): n_dims is 5; must be 1 to 4");
  EXPECT_PARSE_ERROR(one_tensor({"t0", {}, GgmlType::F32}), "n_dims is 0");
  EXPECT_PARSE_ERROR(one_tensor({"z", {4, 0}, GgmlType::F32}), "('z'): dimension 1 is 0");
  EXPECT_PARSE_ERROR(one_tensor({"big", {uint64_t{1} << 32, uint64_t{1} << 32}, GgmlType::F32}),
                     "('big'): element count overflows 64 bits");
  EXPECT_PARSE_ERROR(one_tensor({"neg", {kU64Max}, GgmlType::F32}), "element count overflows");
  EXPECT_PARSE_ERROR(one_tensor({"f64", {uint64_t{1} << 62}, GgmlType::F64}), "('f64'): data size overflows 64 bits");
  EXPECT_PARSE_ERROR(one_tensor({"u", {32}, 99u}), "('u'): unknown ggml tensor type id 99");
  EXPECT_PARSE_ERROR(one_tensor({"u4", {32}, 4u}), "unknown ggml tensor type id 4");  // removed Q4_2
  EXPECT_PARSE_ERROR(one_tensor({"r", {48, 2}, GgmlType::Q8_0}),
                     "('r'): row length 48 is not a multiple of the Q8_0 block size 32");
  EXPECT_PARSE_ERROR(one_tensor({"k", {128}, GgmlType::Q4_K}), "block size 256");
  EXPECT_PARSE_ERROR(one_tensor({"blk.0.ffn_down.weight", {384, 4}, GgmlType::Q6_K}),
                     "('blk.0.ffn_down.weight'): row length 384 is not a multiple of the Q6_K block size 256");
  EXPECT_EQ(parse_error(one_tensor({"x", {256}, GgmlType::IQ4_XS})), "");
}

// A K-quant tensor whose data the file does not hold in full.
TEST(GgufHostile, TruncatedKQuantTensor) {
  GgufWriter::Tensor k{"blk.0.ffn_down.weight", {512, 2}, GgmlType::Q6_K};
  k.data = std::string(700, '\1');  // 4 super-blocks of 210 bytes: 840 needed
  EXPECT_PARSE_ERROR(one_tensor(k), "tensor 'blk.0.ffn_down.weight' (840 bytes at data offset 0)");
}

TEST(GgufHostile, BadTensorOffsets) {
  GgufWriter::Tensor past{"p", {4}, GgmlType::F32};
  past.offset = 1 << 20;
  EXPECT_PARSE_ERROR(one_tensor(past), "truncated file: tensor 'p' (16 bytes at data offset 1048576) ends past byte");
  GgufWriter::Tensor wrap{"w", {4}, GgmlType::F32};
  wrap.offset = kU64Max - 31;  // aligned, and offset + size wraps around 2^64
  EXPECT_PARSE_ERROR(one_tensor(wrap), "tensor 'w'");
  GgufWriter::Tensor mis{"m", {4}, GgmlType::F32};
  mis.offset = 16;
  EXPECT_PARSE_ERROR(one_tensor(mis), "('m'): data offset 16 is not a multiple of the alignment 32");
  GgufWriter::Tensor shortdata{"s", {64}, GgmlType::F32};
  shortdata.data = std::string(100, '\1');  // 256 bytes needed
  EXPECT_PARSE_ERROR(one_tensor(shortdata), "tensor 's' (256 bytes at data offset 0)");
}

}  // namespace
}  // namespace nexus
