// GgufFile: the shared models (v3, v2 edge, v1 edge), synthetic files covering
// every value type, and hostile files (truncation at every byte, bad headers,
// huge counts, bad tensor infos). Every bad input must throw nexus::Error with
// a message naming the problem.
#include <gtest/gtest.h>

#include <ostream>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "gguf/gguf_file.h"
#include "support/gguf_writer.h"
#include "support/test_support.h"
#include "util/error.h"

namespace nexus {
namespace {

using test::GgufWriter;
using VT = GgufValueType;


// ---- shared models ------------------------------------------------------------

// Parameters the llama architecture implies from its metadata (untied output).
uint64_t llama_params(const GgufFile& f, bool has_output) {
  const uint64_t d = *f.get_int("llama.embedding_length"), ff = *f.get_int("llama.feed_forward_length");
  const uint64_t heads = *f.get_int("llama.attention.head_count");
  const uint64_t kv = *f.get_int("llama.attention.head_count_kv"), L = *f.get_int("llama.block_count");
  const uint64_t vocab = f.get_array("tokenizer.ggml.tokens")->size();
  const uint64_t kv_dim = d / heads * kv;
  const uint64_t per_layer = 2 * d + d * d * 2 + 2 * d * kv_dim + 3 * d * ff;
  return vocab * d * (has_output ? 2 : 1) + d + L * per_layer;
}

void expect_tensors_inside_file(const GgufFile& f) {
  for (const TensorInfo& t : f.tensors()) {
    const GgmlTypeTraits* tr = ggml_type_traits(static_cast<uint32_t>(t.type));
    ASSERT_NE(tr, nullptr) << t.name;
    EXPECT_EQ(t.n_bytes, t.n_elements() / tr->block_size * tr->type_size) << t.name;
    EXPECT_EQ(t.n_bytes, ggml_row_size(t.type, t.ne[0]) * t.n_rows()) << t.name;
    EXPECT_LE(t.offset + t.n_bytes, f.file_size()) << t.name;
    EXPECT_EQ(t.offset % f.alignment(), 0u) << t.name;
    EXPECT_EQ(f.find_tensor(t.name), &t);
  }
}

TEST(GgufShared, Stories260K) {
  NEXUS_REQUIRE_SHARED(path, "stories260K.gguf");
  GgufFile f(path);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.metadata().size(), 19u);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_int("llama.block_count"), 5);
  EXPECT_EQ(f.get_int("llama.embedding_length"), 64);
  EXPECT_EQ(f.get_int("llama.feed_forward_length"), 172);
  EXPECT_EQ(f.get_int("llama.attention.head_count"), 8);
  EXPECT_EQ(f.get_int("llama.attention.head_count_kv"), 4);
  EXPECT_EQ(f.get_int("llama.context_length"), 2048);
  EXPECT_NEAR(*f.get_float("llama.attention.layer_norm_rms_epsilon"), 1e-5, 1e-9);
  EXPECT_EQ(f.find("llama.attention.layer_norm_rms_epsilon")->type, VT::FLOAT32);
  EXPECT_EQ(f.get_int("tokenizer.ggml.seperator_token_id"), 4294967295);  // UINT32 max, not -1
  const GgufArray* tokens = f.get_array("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  EXPECT_EQ(tokens->elem_type, VT::STRING);
  ASSERT_EQ(tokens->size(), 512u);
  EXPECT_EQ(tokens->strings[1], "<s>");
  EXPECT_EQ(tokens->strings[3], "<0x00>");
  EXPECT_EQ(f.get_array("tokenizer.ggml.scores")->floats.size(), 512u);
  EXPECT_EQ(f.get_array("tokenizer.ggml.token_type")->ints.size(), 512u);
  EXPECT_EQ(f.get_array("tokenizer.ggml.token_type")->ints[1], 3);
  EXPECT_FALSE(f.get_int("no.such.key").has_value());
  EXPECT_EQ(f.get_array("no.such.key"), nullptr);

  ASSERT_EQ(f.tensors().size(), 48u);
  const TensorInfo* emb = f.find_tensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->type, GgmlType::F32);
  EXPECT_EQ(emb->ne, (std::vector<uint64_t>{64, 512}));
  EXPECT_EQ(emb->n_bytes, 64u * 512 * 4);
  EXPECT_EQ(emb->offset, 14176u);  // header ends at 14152, padded to 32
  float first;
  std::memcpy(&first, emb->data, 4);
  EXPECT_FLOAT_EQ(first, -0.29474878f);
  EXPECT_EQ(f.find_tensor("blk.0.attn_k.weight")->ne, (std::vector<uint64_t>{64, 32}));  // GQA: 4 KV heads of 8
  EXPECT_EQ(f.find_tensor("blk.4.ffn_down.weight")->ne, (std::vector<uint64_t>{172, 64}));
  EXPECT_EQ(f.find_tensor("output_norm.weight")->ne, (std::vector<uint64_t>{64}));
  EXPECT_EQ(f.find_tensor("blk.5.ffn_down.weight"), nullptr);
  expect_tensors_inside_file(f);
  uint64_t params = 0;
  for (const TensorInfo& t : f.tensors()) params += t.n_elements();
  EXPECT_EQ(params, llama_params(f, true));
}

struct TinyLlamaFile {
  const char* file;
  GgmlType type;  // of the matrices
};
// Printed in the test list (and so in CTest's names) as the file name, not
// the struct's bytes.
void PrintTo(const TinyLlamaFile& f, std::ostream* os) { *os << f.file; }

class GgufTinyLlama : public ::testing::TestWithParam<TinyLlamaFile> {};

TEST_P(GgufTinyLlama, MetadataAndTensors) {
  NEXUS_REQUIRE_SHARED(path, GetParam().file);
  GgufFile f(path);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.get_int("llama.block_count"), 8);
  EXPECT_EQ(f.get_int("llama.attention.head_count"), 16);
  EXPECT_EQ(f.get_int("llama.context_length"), 128);
  EXPECT_EQ(f.get_array("tokenizer.ggml.tokens")->size(), 32000u);
  EXPECT_EQ(f.get_array("tokenizer.ggml.scores")->size(), 32000u);
  ASSERT_EQ(f.tensors().size(), 75u);
  const GgmlType wt = GetParam().type;
  EXPECT_EQ(f.find_tensor("token_embd.weight")->type, wt);
  EXPECT_EQ(f.find_tensor("token_embd.weight")->ne, (std::vector<uint64_t>{64, 32000}));
  EXPECT_EQ(f.find_tensor("blk.7.ffn_up.weight")->type, wt);
  EXPECT_EQ(f.find_tensor("blk.7.ffn_up.weight")->ne, (std::vector<uint64_t>{64, 256}));
  EXPECT_EQ(f.find_tensor("blk.0.attn_norm.weight")->type, GgmlType::F32);
  if (wt != GgmlType::F32) {
    EXPECT_EQ(f.get_int("general.file_type"), wt == GgmlType::Q8_0 ? 7 : 2);
  }
  expect_tensors_inside_file(f);
  uint64_t params = 0, last_end = 0;
  for (const TensorInfo& t : f.tensors()) {
    params += t.n_elements();
    last_end = std::max(last_end, t.offset + t.n_bytes);
  }
  EXPECT_EQ(params, llama_params(f, true));
  EXPECT_EQ(last_end, f.file_size());
}

INSTANTIATE_TEST_SUITE_P(Files, GgufTinyLlama,
                         ::testing::Values(TinyLlamaFile{"TinyLLama-v0.F32.gguf", GgmlType::F32},
                                           TinyLlamaFile{"TinyLLama-v0.Q8_0.gguf", GgmlType::Q8_0},
                                           TinyLlamaFile{"TinyLLama-v0.Q4_0.gguf", GgmlType::Q4_0}),
                         [](const auto& info) { return std::string(ggml_type_name(info.param.type)); });

TEST(GgufShared, Version1EdgeFileMatchesV3) {
  NEXUS_REQUIRE_SHARED(v1path, "edge/stories260K.gguf-v1.gguf");
  NEXUS_REQUIRE_SHARED(v3path, "stories260K.gguf");
  GgufFile v1(v1path), v3(v3path);
  EXPECT_EQ(v1.version(), 1u);
  EXPECT_EQ(v1.get_string("general.name"), "tinyllamas-stories-260k");
  EXPECT_EQ(v1.get_int("llama.block_count"), 5);
  EXPECT_EQ(v1.get_int("llama.context_length"), 512);
  EXPECT_EQ(v1.get_array("tokenizer.ggml.tokens")->strings, v3.get_array("tokenizer.ggml.tokens")->strings);
  ASSERT_EQ(v1.tensors().size(), v3.tensors().size());
  expect_tensors_inside_file(v1);
  // Same weights, other order: v1's u32 dims and relative offsets must land on the same bytes.
  for (const TensorInfo& t : v1.tensors()) {
    const TensorInfo* o = v3.find_tensor(t.name);
    ASSERT_NE(o, nullptr) << t.name;
    EXPECT_EQ(t.ne, o->ne) << t.name;
    ASSERT_EQ(t.n_bytes, o->n_bytes) << t.name;
    EXPECT_EQ(std::memcmp(t.data, o->data, t.n_bytes), 0) << t.name;
  }
}

TEST(GgufShared, Row172EdgeFileRefusedByName) {
  NEXUS_REQUIRE_SHARED(path, "edge/stories260K.q8_0-row172.gguf");
  try {
    GgufFile f(path);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find("'blk.0.ffn_down.weight'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("row length 172 is not a multiple of the Q8_0 block size 32"), std::string::npos) << msg;
  }
}

TEST(GgufShared, VocabOnlyFilesWithoutTensorsLoad) {
  NEXUS_REQUIRE_SHARED(path, "tokenizers/ggml-vocab-gpt-2.gguf");
  GgufFile f(path);
  EXPECT_TRUE(f.tensors().empty());
  EXPECT_GT(f.get_array("tokenizer.ggml.tokens")->size(), 50000u);
}

// ---- files on disk ------------------------------------------------------------

std::string expect_file_error(const std::string& path) {
  try {
    GgufFile f(path);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error for " << path;
  return "";
}

TEST(GgufFileErrors, MissingEmptyAndDirectory) {
  const std::string dir = test::make_temp_dir();
  EXPECT_NE(expect_file_error(dir + "/missing.gguf").find("missing.gguf: cannot open: No such file"), std::string::npos);
  std::ofstream(dir + "/empty.gguf").close();
  EXPECT_NE(expect_file_error(dir + "/empty.gguf").find("empty.gguf: empty file"), std::string::npos);
  EXPECT_NE(expect_file_error(dir).find("not a regular file"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(GgufFileErrors, TruncatedFileOnDiskNamesPath) {
  GgufWriter w;
  w.kv("a", w.u32(1));
  w.tensor({"t", {8}, GgmlType::F32});
  std::vector<uint8_t> b = w.build();
  const std::string dir = test::make_temp_dir(), path = dir + "/cut.gguf";
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), b.size() - 1);
  const std::string msg = expect_file_error(path);
  EXPECT_NE(msg.find(path + ": truncated file: tensor 't'"), std::string::npos) << msg;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace nexus
