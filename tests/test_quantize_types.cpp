// quantize_row_ref against llama.cpp: every quantized tensor of the shared
// llama-d256-TYPE.gguf files (written by llama-quantize, February 2025 build,
// no importance matrix) is requantized here from llama-d256-F32.gguf, row by
// row, and compared with llama.cpp's bytes block by block.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "kernels/quant_blocks.h"
#include "model/quantize_ref.h"
#include "support/test_support.h"

namespace nexus {
namespace {

bool implemented(GgmlType t) {
  switch (t) {
    case GgmlType::Q8_0: case GgmlType::Q4_0: case GgmlType::Q4_1: case GgmlType::Q5_0:
    case GgmlType::Q5_1: case GgmlType::Q2_K: case GgmlType::Q3_K: case GgmlType::Q4_K:
    case GgmlType::Q5_K: case GgmlType::Q6_K: case GgmlType::IQ4_NL: case GgmlType::IQ4_XS:
      return true;
    default:
      return false;
  }
}

struct BlockCount {
  int64_t blocks = 0, equal = 0;
  std::string first_mismatch;  // "tensor row r block b", empty when all equal
};

class QuantizeTypes : public ::testing::TestWithParam<const char*> {};

// Byte-exact: for every type the algorithm is ggml's, float operation by
// float operation, and ggml-base (where the reference quantizers live) is
// compiled without FMA contraction or vectorised reductions, so nothing in
// the arithmetic can differ.
TEST_P(QuantizeTypes, EveryBlockEqualsLlamaCpp) {
  NEXUS_REQUIRE_SHARED(f32_path, "arch/llama-d256-F32.gguf");
  NEXUS_REQUIRE_SHARED(q_path, std::string("arch/llama-d256-") + GetParam() + ".gguf");
  const GgufFile f32(f32_path), quantized(q_path);

  std::map<GgmlType, BlockCount> counts;
  std::vector<uint8_t> row;
  for (const TensorInfo& t : quantized.tensors()) {
    if (!implemented(t.type)) continue;
    const TensorInfo* src = f32.find_tensor(t.name);
    ASSERT_NE(src, nullptr) << t.name;
    ASSERT_EQ(src->type, GgmlType::F32) << t.name;
    ASSERT_EQ(src->ne, t.ne) << t.name;
    const auto* traits = ggml_type_traits(static_cast<uint32_t>(t.type));
    const int64_t n = static_cast<int64_t>(t.ne[0]);
    const size_t row_bytes = ggml_row_size(t.type, t.ne[0]);
    const int64_t blocks_per_row = n / traits->block_size;
    row.resize(row_bytes);
    BlockCount& c = counts[t.type];
    for (uint64_t r = 0; r < t.n_rows(); ++r) {
      const auto* x = reinterpret_cast<const float*>(src->data) + r * t.ne[0];
      quantize_row_ref(t.type, x, row.data(), n);
      const uint8_t* want = t.data + r * row_bytes;
      for (int64_t b = 0; b < blocks_per_row; ++b) {
        const size_t off = static_cast<size_t>(b) * traits->type_size;
        const bool same = std::memcmp(row.data() + off, want + off, traits->type_size) == 0;
        c.equal += same;
        if (!same && c.first_mismatch.empty())
          c.first_mismatch = t.name + " row " + std::to_string(r) + " block " + std::to_string(b);
      }
      c.blocks += blocks_per_row;
    }
  }
  ASSERT_FALSE(counts.empty()) << q_path << " holds no type quantize_row_ref writes";
  for (const auto& [type, c] : counts) {
    EXPECT_EQ(c.equal, c.blocks) << ggml_type_name(type) << " in " << GetParam() << ": " << c.equal << " of "
                                 << c.blocks << " blocks equal; first difference at " << c.first_mismatch;
  }
}

INSTANTIATE_TEST_SUITE_P(SharedFiles, QuantizeTypes,
                         ::testing::Values("Q4_K_M", "Q5_K_M", "Q6_K", "Q3_K_M", "Q2_K", "Q4_1", "Q5_0", "Q5_1",
                                           "IQ4_NL", "IQ4_XS", "Q8_0", "Q4_0"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace nexus
