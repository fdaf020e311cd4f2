// GgufWriter: exact v3 layout, metadata of every type read back equal by
// GgufFile, tensor alignment and padding, and refusal of bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "support/test_support.h"
#include "util/error.h"

namespace nexus {
namespace {

template <class T>
T read_at(const std::vector<uint8_t>& b, size_t pos) {
  T v;
  std::memcpy(&v, b.data() + pos, sizeof v);
  return v;
}

const GgufWriter::FillFn kNoTensors = [](size_t, std::span<uint8_t>) { FAIL() << "no tensor to fill"; };

TEST(GgufWriter, EmptyFileHasTheExactV3Layout) {
  GgufWriter w;
  const std::vector<uint8_t> b = w.write_to_memory(kNoTensors);
  // magic | version | n_tensors | n_kv | "general.alignment" (u64 len) | UINT32 tag | 32
  const size_t expected_header = 4 + 4 + 8 + 8 + 8 + 17 + 4 + 4;
  ASSERT_EQ(b.size(), (expected_header + 31) / 32 * 32);
  EXPECT_EQ(std::string(b.begin(), b.begin() + 4), "GGUF");
  EXPECT_EQ(read_at<uint32_t>(b, 4), 3u);
  EXPECT_EQ(read_at<uint64_t>(b, 8), 0u);
  EXPECT_EQ(read_at<uint64_t>(b, 16), 1u);
  EXPECT_EQ(read_at<uint64_t>(b, 24), 17u);
  EXPECT_EQ(std::string(b.begin() + 32, b.begin() + 49), "general.alignment");
  EXPECT_EQ(read_at<uint32_t>(b, 49), static_cast<uint32_t>(GgufValueType::UINT32));
  EXPECT_EQ(read_at<uint32_t>(b, 53), 32u);
  for (size_t i = expected_header; i < b.size(); ++i) EXPECT_EQ(b[i], 0) << "padding byte " << i;
  EXPECT_EQ(w.file_size(), b.size());
}

TEST(GgufWriter, MetadataOfEveryTypeRoundTrips) {
  GgufWriter w;
  w.set_u8("u8", 255);
  w.set_i8("i8", -128);
  w.set_u16("u16", 65535);
  w.set_i16("i16", -32768);
  w.set_u32("u32", 4294967295u);
  w.set_i32("i32", std::numeric_limits<int32_t>::min());
  w.set_u64("u64", std::numeric_limits<uint64_t>::max());
  w.set_i64("i64", std::numeric_limits<int64_t>::min());
  w.set_f32("f32", 1e-5f);
  w.set_f64("f64", -0.1);
  w.set_bool("bool", true);
  w.set_string("str", std::string("h\xc3\xa9llo\0x", 8));  // UTF-8 and an embedded NUL
  w.set_string("empty", "");
  w.set_int_array("a_u8", GgufValueType::UINT8, {0, 1, 255});
  w.set_int_array("a_i32", GgufValueType::INT32, {-5, 0, 2147483647});
  w.set_int_array("a_u64", GgufValueType::UINT64, {-1, 7});  // -1 = the bits of UINT64_MAX
  w.set_int_array("a_bool", GgufValueType::BOOL, {1, 0});
  w.set_float_array("a_f32", GgufValueType::FLOAT32, {0.5, -1.25, 3e38});
  w.set_float_array("a_f64", GgufValueType::FLOAT64, {0.1, -1e300});
  w.set_string_array("a_str", {"<s>", "", "\xe2\x96\x81the"});
  w.set_int_array("a_empty", GgufValueType::INT16, {});
  auto inner = std::make_shared<GgufArray>();
  inner->elem_type = GgufValueType::INT8;
  inner->ints = {-1, 2};
  auto outer = std::make_shared<GgufArray>();
  outer->elem_type = GgufValueType::ARRAY;
  outer->arrays = {GgufValue{GgufValueType::ARRAY, inner}, GgufValue{GgufValueType::ARRAY, inner}};
  w.set("nested", GgufValue{GgufValueType::ARRAY, outer});

  const std::string path = test::make_temp_dir() + "/meta.gguf";
  w.write(path, kNoTensors);
  const GgufFile f(path);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.metadata().back().first, "general.alignment");
  EXPECT_EQ(f.find("general.alignment")->type, GgufValueType::UINT32);

  auto type_of = [&](const char* k) { return f.find(k)->type; };
  EXPECT_EQ(type_of("u8"), GgufValueType::UINT8);
  EXPECT_EQ(type_of("i8"), GgufValueType::INT8);
  EXPECT_EQ(type_of("u16"), GgufValueType::UINT16);
  EXPECT_EQ(type_of("i16"), GgufValueType::INT16);
  EXPECT_EQ(type_of("u32"), GgufValueType::UINT32);
  EXPECT_EQ(type_of("i32"), GgufValueType::INT32);
  EXPECT_EQ(type_of("u64"), GgufValueType::UINT64);
  EXPECT_EQ(type_of("i64"), GgufValueType::INT64);
  EXPECT_EQ(type_of("f32"), GgufValueType::FLOAT32);
  EXPECT_EQ(type_of("f64"), GgufValueType::FLOAT64);
  EXPECT_EQ(*f.get_int("u8"), 255);
  EXPECT_EQ(*f.get_int("i8"), -128);
  EXPECT_EQ(*f.get_int("u16"), 65535);
  EXPECT_EQ(*f.get_int("i16"), -32768);
  EXPECT_EQ(*f.get_int("u32"), 4294967295LL);
  EXPECT_EQ(*f.get_int("i32"), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(std::get<uint64_t>(f.find("u64")->v), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(*f.get_int("i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(*f.get_float("f32"), static_cast<double>(1e-5f));
  EXPECT_EQ(*f.get_float("f64"), -0.1);
  EXPECT_EQ(*f.get_bool("bool"), true);
  EXPECT_EQ(*f.get_string("str"), std::string("h\xc3\xa9llo\0x", 8));
  EXPECT_EQ(*f.get_string("empty"), "");

  EXPECT_EQ(f.get_array("a_u8")->elem_type, GgufValueType::UINT8);
  EXPECT_EQ(f.get_array("a_u8")->ints, (std::vector<int64_t>{0, 1, 255}));
  EXPECT_EQ(f.get_array("a_i32")->ints, (std::vector<int64_t>{-5, 0, 2147483647}));
  EXPECT_EQ(f.get_array("a_u64")->elem_type, GgufValueType::UINT64);
  EXPECT_EQ(f.get_array("a_u64")->ints, (std::vector<int64_t>{-1, 7}));
  EXPECT_EQ(f.get_array("a_bool")->elem_type, GgufValueType::BOOL);
  EXPECT_EQ(f.get_array("a_bool")->ints, (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(f.get_array("a_f32")->elem_type, GgufValueType::FLOAT32);
  EXPECT_EQ(f.get_array("a_f32")->floats, (std::vector<double>{0.5, -1.25, static_cast<double>(3e38f)}));
  EXPECT_EQ(f.get_array("a_f64")->floats, (std::vector<double>{0.1, -1e300}));
  EXPECT_EQ(f.get_array("a_str")->strings, (std::vector<std::string>{"<s>", "", "\xe2\x96\x81the"}));
  EXPECT_EQ(f.get_array("a_empty")->elem_type, GgufValueType::INT16);
  EXPECT_EQ(f.get_array("a_empty")->size(), 0u);
  const GgufArray* n = f.get_array("nested");
  ASSERT_EQ(n->elem_type, GgufValueType::ARRAY);
  ASSERT_EQ(n->arrays.size(), 2u);
  const auto& in = *std::get<std::shared_ptr<GgufArray>>(n->arrays[1].v);
  EXPECT_EQ(in.elem_type, GgufValueType::INT8);
  EXPECT_EQ(in.ints, (std::vector<int64_t>{-1, 2}));

  // Values read from a file can be written to another unchanged.
  GgufWriter copy;
  for (const auto& [k, v] : f.metadata())
    if (k != "general.alignment") copy.set(k, v);
  EXPECT_EQ(copy.write_to_memory(kNoTensors), w.write_to_memory(kNoTensors));
}

TEST(GgufWriter, TensorsAreAlignedPaddedAndReadBack) {
  for (uint32_t align : {32u, 64u}) {
    GgufWriter w(align);
    w.set_string("general.architecture", "test");
    w.add_tensor("f32", GgmlType::F32, {5, 3});       // 60 bytes
    w.add_tensor("q8", GgmlType::Q8_0, {64, 3});      // 3 rows x 2 blocks x 34 = 204
    w.add_tensor("f16", GgmlType::F16, {7});          // 14
    w.add_tensor("q4", GgmlType::Q4_0, {32, 1, 2, 1});  // 36
    ASSERT_EQ(w.tensors()[1].n_bytes, 204u);
    auto fill = [](size_t i, std::span<uint8_t> dst) {
      for (size_t k = 0; k < dst.size(); ++k) dst[k] = static_cast<uint8_t>(1 + i * 50 + k % 200);
    };
    const std::vector<uint8_t> b = w.write_to_memory(fill);
    EXPECT_EQ(b.size(), w.file_size());
    EXPECT_EQ(b.size() % align, 0u);
    const GgufFile f(b, "mem");
    EXPECT_EQ(f.alignment(), align);
    ASSERT_EQ(f.tensors().size(), 4u);
    for (size_t i = 0; i < 4; ++i) {
      const TensorInfo& t = f.tensors()[i];
      EXPECT_EQ(t.name, w.tensors()[i].name);
      EXPECT_EQ(t.ne, w.tensors()[i].ne);
      EXPECT_EQ(t.type, w.tensors()[i].type);
      EXPECT_EQ(t.offset % align, 0u) << t.name;
      ASSERT_EQ(t.n_bytes, w.tensors()[i].n_bytes);
      for (size_t k = 0; k < t.n_bytes; ++k) ASSERT_EQ(t.data[k], static_cast<uint8_t>(1 + i * 50 + k % 200));
      // Zero padding up to the next tensor (or the end of the file).
      const uint64_t end = i + 1 < 4 ? f.tensors()[i + 1].offset : b.size();
      for (uint64_t k = t.offset + t.n_bytes; k < end; ++k) ASSERT_EQ(b[k], 0) << t.name << " padding " << k;
      EXPECT_LT(end - (t.offset + t.n_bytes), align);
    }
  }
}

TEST(GgufWriter, RefusesBadInput) {
  GgufWriter w;
  w.set_u32("k", 1);
  EXPECT_THROW(w.set_u32("k", 2), Error);
  EXPECT_THROW(w.set_u32("", 2), Error);
  EXPECT_THROW(w.set_u32("general.alignment", 64), Error);
  EXPECT_THROW(w.set("big", GgufValue{GgufValueType::UINT8, uint64_t{256}}), Error);
  EXPECT_THROW(w.set("neg", GgufValue{GgufValueType::UINT32, int64_t{-1}}), Error);
  EXPECT_THROW(w.set("str", GgufValue{GgufValueType::STRING, 1.0}), Error);
  EXPECT_THROW(w.set("t", GgufValue{static_cast<GgufValueType>(13), uint64_t{0}}), Error);
  EXPECT_THROW(w.set_int_array("a", GgufValueType::INT8, {128}), Error);
  EXPECT_THROW(w.set_int_array("b", GgufValueType::BOOL, {2}), Error);
  EXPECT_THROW(w.set_int_array("c", GgufValueType::STRING, {1}), Error);
  auto mixed = std::make_shared<GgufArray>();
  mixed->elem_type = GgufValueType::STRING;
  mixed->ints = {1};
  EXPECT_THROW(w.set("d", GgufValue{GgufValueType::ARRAY, mixed}), Error);
  EXPECT_THROW(w.set("e", GgufValue{GgufValueType::ARRAY, std::shared_ptr<GgufArray>()}), Error);

  w.add_tensor("t", GgmlType::F32, {4});
  EXPECT_THROW(w.add_tensor("t", GgmlType::F32, {4}), Error);
  EXPECT_THROW(w.add_tensor("", GgmlType::F32, {4}), Error);
  EXPECT_THROW(w.add_tensor("q", GgmlType::Q8_0, {33, 2}), Error);
  EXPECT_THROW(w.add_tensor("z", GgmlType::F32, {4, 0}), Error);
  EXPECT_THROW(w.add_tensor("5d", GgmlType::F32, {1, 1, 1, 1, 1}), Error);
  EXPECT_THROW(w.add_tensor("0d", GgmlType::F32, {}), Error);
  EXPECT_THROW(w.add_tensor("u", static_cast<GgmlType>(99), {4}), Error);
  EXPECT_THROW(GgufWriter{24}, Error);
  EXPECT_THROW(GgufWriter{0}, Error);
}

TEST(GgufWriter, FailedWriteLeavesNoFile) {
  const std::string dir = test::make_temp_dir();
  GgufWriter w;
  w.add_tensor("a", GgmlType::F32, {8});
  w.add_tensor("b", GgmlType::F32, {8});
  const std::string path = dir + "/x.gguf";
  auto fill = [](size_t i, std::span<uint8_t>) {
    if (i == 1) throw Error("generator failed");
  };
  EXPECT_THROW(w.write(path, fill), Error);
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  try {
    w.write(dir + "/no/such/dir/x.gguf", [](size_t, std::span<uint8_t>) {});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no/such/dir"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace nexus
