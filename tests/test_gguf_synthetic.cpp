// GgufFile on files built in memory (tests/support/gguf_writer.h): every
// metadata value type in versions 1-3, getters, value rendering, tensor
// layout, and hostile inputs, which must all throw nexus::Error naming the
// problem.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "gguf/gguf_file.h"
#include "support/gguf_writer.h"
#include "util/error.h"

namespace nexus {
namespace {

using test::GgufWriter;
using VT = GgufValueType;
using Bytes = std::vector<uint8_t>;


// A file with every value type (incl. nested and empty arrays) and tensors.
GgufWriter every_type_writer(uint32_t version) {
  GgufWriter w(version);
  w.kv("t.u8", w.u8(200));
  w.kv("t.i8", w.i8(-100));
  w.kv("t.u16", w.u16(60000));
  w.kv("t.i16", w.i16(-30000));
  w.kv("t.u32", w.u32(4000000000u));
  w.kv("t.i32", w.i32(-2000000000));
  w.kv("t.f32", w.f32(1.5f));
  w.kv("t.bool", w.boolean(true));
  w.kv("t.str", w.str("he said \"hi\"\n"));
  w.kv("t.u64", w.u64(std::numeric_limits<uint64_t>::max()));
  w.kv("t.i64", w.i64(std::numeric_limits<int64_t>::min()));
  w.kv("t.f64", w.f64(-2.25));
  w.kv("t.arr_i32", w.array(VT::INT32, {w.i32(1), w.i32(-2), w.i32(3)}));
  w.kv("t.arr_f32", w.array(VT::FLOAT32, {w.f32(0.5f), w.f32(-0.25f)}));
  w.kv("t.arr_f64", w.array(VT::FLOAT64, {w.f64(1e300)}));
  w.kv("t.arr_str", w.array(VT::STRING, {w.str("a"), w.str(""), w.str("ccc")}));
  w.kv("t.arr_bool", w.array(VT::BOOL, {w.boolean(true), w.boolean(false)}));
  w.kv("t.arr_u64", w.array(VT::UINT64, {w.u64(9223372036854775813ull)}));
  w.kv("t.arr_u8", w.array(VT::UINT8, {w.u8(255), w.u8(0)}));
  w.kv("t.arr_empty", w.array(VT::INT16, {}));
  w.kv("t.nested", w.array(VT::ARRAY, {w.array(VT::INT8, {w.i8(1), w.i8(-2)}), w.array(VT::STRING, {w.str("x")}),
                                       w.array(VT::ARRAY, {w.array(VT::FLOAT64, {w.f64(1.0)})})}));
  w.tensor({"a", {4}, GgmlType::F32});
  w.tensor({"b", {32, 3}, GgmlType::Q8_0});
  w.tensor({"c", {2, 3, 4, 5}, GgmlType::F16});
  return w;
}

class GgufEveryType : public ::testing::TestWithParam<uint32_t> {};

TEST_P(GgufEveryType, ValuesRoundTrip) {
  const Bytes b = every_type_writer(GetParam()).build();
  GgufFile f(std::span<const uint8_t>(b), "mem.gguf");
  EXPECT_EQ(f.version(), GetParam());
  ASSERT_EQ(f.metadata().size(), 21u);
  EXPECT_EQ(f.metadata()[0].first, "t.u8");  // file order kept
  EXPECT_EQ(f.find("t.u8")->type, VT::UINT8);
  EXPECT_EQ(std::get<uint64_t>(f.find("t.u8")->v), 200u);
  EXPECT_EQ(std::get<int64_t>(f.find("t.i8")->v), -100);
  EXPECT_EQ(f.get_int("t.u16"), 60000);
  EXPECT_EQ(f.get_int("t.i16"), -30000);
  EXPECT_EQ(f.get_int("t.u32"), 4000000000);
  EXPECT_EQ(f.get_int("t.i32"), -2000000000);
  EXPECT_EQ(f.get_float("t.f32"), 1.5);
  EXPECT_EQ(f.get_bool("t.bool"), true);
  EXPECT_EQ(f.get_string("t.str"), "he said \"hi\"\n");
  EXPECT_EQ(std::get<uint64_t>(f.find("t.u64")->v), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(f.get_int("t.i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(f.get_float("t.f64"), -2.25);
  EXPECT_EQ(f.get_float("t.i32"), -2e9);  // integers convert to float

  EXPECT_EQ(f.get_array("t.arr_i32")->ints, (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(f.get_array("t.arr_f32")->floats, (std::vector<double>{0.5, -0.25}));
  EXPECT_EQ(f.get_array("t.arr_f64")->floats, (std::vector<double>{1e300}));
  EXPECT_EQ(f.get_array("t.arr_str")->strings, (std::vector<std::string>{"a", "", "ccc"}));
  EXPECT_EQ(f.get_array("t.arr_bool")->ints, (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(static_cast<uint64_t>(f.get_array("t.arr_u64")->ints[0]), 9223372036854775813ull);  // bits kept
  EXPECT_EQ(f.get_array("t.arr_u8")->ints, (std::vector<int64_t>{255, 0}));
  EXPECT_EQ(f.get_array("t.arr_empty")->size(), 0u);
  EXPECT_EQ(f.get_array("t.arr_empty")->elem_type, VT::INT16);
  const GgufArray* nested = f.get_array("t.nested");
  ASSERT_EQ(nested->size(), 3u);
  const auto& inner0 = std::get<std::shared_ptr<GgufArray>>(nested->arrays[0].v);
  EXPECT_EQ(inner0->ints, (std::vector<int64_t>{1, -2}));
  const auto& inner2 = std::get<std::shared_ptr<GgufArray>>(nested->arrays[2].v);
  EXPECT_EQ(std::get<std::shared_ptr<GgufArray>>(inner2->arrays[0].v)->floats, (std::vector<double>{1.0}));

  ASSERT_EQ(f.tensors().size(), 3u);
  const TensorInfo& a = f.tensors()[0];
  const TensorInfo& q = f.tensors()[1];
  const TensorInfo& c = f.tensors()[2];
  EXPECT_EQ(q.n_bytes, 3u * 34);
  EXPECT_EQ(q.n_rows(), 3u);
  EXPECT_EQ(c.n_elements(), 120u);
  EXPECT_EQ(c.n_bytes, 240u);
  EXPECT_EQ(q.offset - a.offset, 32u);  // a's 16 bytes padded to the alignment
  EXPECT_EQ(c.offset + c.n_bytes, f.file_size());
  for (size_t k = 0; k < 3; ++k)
    for (uint64_t i = 0; i < f.tensors()[k].n_bytes; ++i)
      ASSERT_EQ(f.tensors()[k].data[i], GgufWriter::pattern(k, i)) << k << " " << i;
}

INSTANTIATE_TEST_SUITE_P(Versions, GgufEveryType, ::testing::Values(1u, 2u, 3u));

TEST(GgufGetters, TypeMismatchesThrowAbsentIsNullopt) {
  const Bytes b = every_type_writer(3).build();
  GgufFile f(std::span<const uint8_t>(b), "mem.gguf");
  EXPECT_THROW(f.get_int("t.str"), Error);
  EXPECT_THROW(f.get_int("t.f32"), Error);
  EXPECT_THROW(f.get_int("t.bool"), Error);
  EXPECT_THROW(f.get_int("t.u64"), Error);  // above INT64_MAX
  EXPECT_THROW(f.get_string("t.u8"), Error);
  EXPECT_THROW(f.get_float("t.str"), Error);
  EXPECT_THROW(f.get_bool("t.u8"), Error);
  EXPECT_THROW(f.get_array("t.u8"), Error);
  try {
    f.get_int("t.str");
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "mem.gguf: metadata 't.str' has type STRING, expected an integer");
  }
  EXPECT_FALSE(f.get_string("absent").has_value());
  EXPECT_FALSE(f.get_float("absent").has_value());
  EXPECT_FALSE(f.get_bool("absent").has_value());
  EXPECT_EQ(f.find("absent"), nullptr);
  EXPECT_EQ(f.find_tensor("absent"), nullptr);
}

TEST(GgufValueToString, RendersEveryKind) {
  const Bytes b = every_type_writer(3).build();
  GgufFile f(std::span<const uint8_t>(b), "mem.gguf");
  auto s = [&](const char* k, size_t n = 8) { return gguf_value_to_string(*f.find(k), n); };
  EXPECT_EQ(s("t.u8"), "200");
  EXPECT_EQ(s("t.i64"), "-9223372036854775808");
  EXPECT_EQ(s("t.u64"), "18446744073709551615");
  EXPECT_EQ(s("t.f32"), "1.5");
  EXPECT_EQ(s("t.bool"), "true");
  EXPECT_EQ(s("t.str"), "\"he said \\\"hi\\\"\\n\"");
  EXPECT_EQ(s("t.arr_i32"), "[3 x INT32] [1, -2, 3]");
  EXPECT_EQ(s("t.arr_i32", 2), "[3 x INT32] [1, -2, ...]");
  EXPECT_EQ(s("t.arr_str"), "[3 x STRING] [\"a\", \"\", \"ccc\"]");
  EXPECT_EQ(s("t.arr_bool"), "[2 x BOOL] [true, false]");
  EXPECT_EQ(s("t.arr_u64"), "[1 x UINT64] [9223372036854775813]");
  EXPECT_EQ(s("t.arr_empty"), "[0 x INT16] []");
  EXPECT_EQ(s("t.nested", 1), "[3 x ARRAY] [[2 x INT8] [1, ...], ...]");
  EXPECT_EQ(s("t.arr_str", 0), "[3 x STRING] [...]");
}

TEST(GgufLayout, CustomAlignmentAndAllTypes) {
  GgufWriter w;
  w.kv("general.alignment", w.u32(64));
  const uint32_t ids[] = {0, 1, 2, 3, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 30};
  for (uint32_t id : ids) w.tensor({"t" + std::to_string(id), {256, 2}, id});
  const Bytes b = w.build(64);
  GgufFile f(std::span<const uint8_t>(b), "mem.gguf");
  EXPECT_EQ(f.alignment(), 64u);
  ASSERT_EQ(f.tensors().size(), std::size(ids));
  for (const TensorInfo& t : f.tensors()) {
    const GgmlTypeTraits* tr = ggml_type_traits(static_cast<uint32_t>(t.type));
    EXPECT_EQ(t.offset % 64, 0u) << t.name;
    EXPECT_EQ(t.n_bytes, 512u / tr->block_size * tr->type_size) << t.name;
  }
}

TEST(GgufLayout, NoTensorsNeedsNoPadding) {
  GgufWriter w;
  w.kv("a", w.str("xyz"));
  Bytes b = w.build();
  const size_t unpadded = 4 + 4 + 8 + 8 + (8 + 1) + 4 + (8 + 3);
  b.resize(unpadded);  // vocab-only files end right after the kv pairs
  GgufFile f(std::span<const uint8_t>(b), "mem.gguf");
  EXPECT_EQ(f.get_string("a"), "xyz");
}

}  // namespace
}  // namespace nexus
