// CpuTail (the CPU half of a --gpu-layers split) against BatchForward: from
// the embedded tokens (first_layer 0) both run the same steps over an F16
// paged cache, so the logits must agree bit for bit -- over a mixed
// prefill/decode batch and a following decode step.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "gguf/gguf_file.h"
#include "kernels/dequant.h"
#include "model/batch_forward.h"
#include "model/cpu_tail.h"
#include "model/kv_cache.h"
#include "model/llama_model.h"
#include "support/test_support.h"
#include "util/error.h"

using namespace nexus;

namespace {

std::vector<float> embed(const LlamaModel& m, std::span<const SeqRun> runs) {
  const int64_t E = m.config().n_embd;
  std::vector<float> x;
  for (const SeqRun& r : runs)
    for (int32_t id : r.tokens) {
      x.resize(x.size() + E);
      dequantize_row(m.tok_embd().type, m.tok_embd().row(id), x.data() + x.size() - E, E);
    }
  return x;
}

}  // namespace

TEST(CpuTail, FromLayerZeroMatchesBatchForwardBitForBit) {
  NEXUS_REQUIRE_SHARED(path, "stories260K.gguf");
  GgufFile gguf(path);
  LlamaModel model(gguf);
  KvCache cache(model.config(), 8, 16, KvType::F16);
  BatchForward bf(model, cache, 2);
  CpuTail tail(model, 0, 8, 16, 2);

  const std::vector<int32_t> a = {1, 400, 22, 97, 300}, b = {1, 50, 60};
  const std::vector<int32_t> bt_a = {0, 1}, bt_b = {5};
  std::vector<SeqRun> runs = {{a, 0, bt_a, true}, {b, 0, bt_b, true}};
  std::span<const float> want = bf.forward(runs);
  std::vector<float> want_copy(want.begin(), want.end());
  std::span<const float> got = tail.forward(embed(model, runs), runs);
  ASSERT_EQ(got.size(), want_copy.size());
  EXPECT_EQ(0, std::memcmp(got.data(), want_copy.data(), got.size() * sizeof(float)));

  const std::vector<int32_t> da = {33}, db = {44};
  std::vector<SeqRun> step = {{da, 5, bt_a, true}, {db, 3, bt_b, false}};
  want = bf.forward(step);
  want_copy.assign(want.begin(), want.end());
  got = tail.forward(embed(model, step), step);
  ASSERT_EQ(got.size(), static_cast<size_t>(model.config().n_vocab));  // one want_logits row
  EXPECT_EQ(0, std::memcmp(got.data(), want_copy.data(), got.size() * sizeof(float)));
}

TEST(CpuTail, RejectsLayerOutsideModel) {
  NEXUS_REQUIRE_SHARED(path, "stories260K.gguf");
  GgufFile gguf(path);
  LlamaModel model(gguf);
  EXPECT_THROW(CpuTail(model, -1, 4, 16), Error);
  EXPECT_THROW(CpuTail(model, model.config().n_layer + 1, 4, 16), Error);
  std::vector<float> wrong(3);
  const std::vector<int32_t> t = {1}, bt = {0};
  std::vector<SeqRun> runs = {{t, 0, bt, true}};
  CpuTail tail(model, 1, 4, 16, 1);
  EXPECT_THROW(tail.forward(wrong, runs), Error);  // residual of the wrong size
}
