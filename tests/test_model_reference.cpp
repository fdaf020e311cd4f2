// The forward pass against ../shared/models/reference: greedy decoding from an
// independent implementation, with BOS, stopping at end-of-generation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gguf/gguf_file.h"
#include "model/llama_context.h"
#include "model/llama_model.h"
#include "support/test_support.h"
#include "util/error.h"

using namespace nexus;

namespace {

struct Reference {
  std::string model;
  std::vector<int32_t> prompt_ids, greedy_ids;
  std::vector<std::pair<int32_t, float>> top5;
  int n_predict = 0;
};

Reference load_reference(const std::string& path) {
  std::ifstream in(path);
  nlohmann::json j = nlohmann::json::parse(in);
  Reference r;
  r.model = j.at("model");
  r.prompt_ids = j.at("prompt_ids").get<std::vector<int32_t>>();
  r.greedy_ids = j.at("greedy_ids").get<std::vector<int32_t>>();
  r.n_predict = j.at("n_predict");
  for (auto& e : j.at("first_step_top5_logits")) r.top5.emplace_back(e[0].get<int32_t>(), e[1].get<float>());
  return r;
}

int32_t argmax(std::span<const float> v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// Greedy decoding as the reference did it: prefill the prompt, then one token
// per step until n_predict tokens or an end-of-generation token.
// gaps[i]: how far below our argmax the reference's token i scored (0 when
// they agree), to tell a near-tie from a real disagreement.
std::vector<int32_t> greedy(LlamaContext& ctx, const Reference& ref, int32_t eos, std::vector<float>* first_logits,
                            std::vector<float>* gaps) {
  std::span<const float> logits = ctx.eval(ref.prompt_ids);
  if (first_logits) first_logits->assign(logits.begin(), logits.end());
  std::vector<int32_t> out;
  while (static_cast<int>(out.size()) < ref.n_predict) {
    const int32_t id = argmax(logits);
    const size_t i = out.size();
    gaps->push_back(i < ref.greedy_ids.size() ? logits[id] - logits[ref.greedy_ids[i]] : 0.0f);
    out.push_back(id);
    if (id == eos || ctx.n_past() >= ctx.n_ctx()) break;
    logits = ctx.eval(std::span<const int32_t>(&id, 1));
  }
  return out;
}

void check_reference(const std::string& ref_name, size_t min_prefix) {
  NEXUS_REQUIRE_SHARED(ref_path, "reference/" + ref_name);
  const Reference ref = load_reference(ref_path);
  NEXUS_REQUIRE_SHARED(model_path, ref.model);
  GgufFile gguf(model_path);
  LlamaModel model(gguf);
  LlamaContext ctx(model, 0, 2);
  const int32_t eos = static_cast<int32_t>(gguf.get_int("tokenizer.ggml.eos_token_id").value_or(-1));

  std::vector<float> logits, gaps;
  const std::vector<int32_t> got = greedy(ctx, ref, eos, &logits, &gaps);

  // First-step logits: within 1e-2 relative of the reference's top 5.
  for (auto [id, value] : ref.top5)
    EXPECT_NEAR(logits[id], value, 1e-2 * std::abs(value)) << "token " << id;
  if (std::getenv("NEXUS_DEBUG_REF")) {
    for (auto [id, value] : ref.top5) fprintf(stderr, "top5 %d ref %.5f ours %.5f\n", id, value, logits[id]);
    for (size_t i = 0; i < gaps.size(); ++i) fprintf(stderr, "step %zu gap %g\n", i, gaps[i]);
  }

  size_t prefix = 0;
  while (prefix < got.size() && prefix < ref.greedy_ids.size() && got[prefix] == ref.greedy_ids[prefix]) ++prefix;
  EXPECT_GE(prefix, min_prefix) << "greedy ids agree with the reference for only " << prefix << " tokens";
  if (min_prefix == ref.greedy_ids.size()) {
    EXPECT_EQ(got, ref.greedy_ids);
  }
  // Where a quantized run parts from the reference, it must be at a near-tie:
  // the reference's token scores within 1% of our best.
  if (prefix < got.size() && prefix < ref.greedy_ids.size()) {
    EXPECT_LT(gaps[prefix], 0.01f * std::abs(logits[got[0]])) << "divergence at " << prefix << " is not a near-tie";
  }
}

}  // namespace

// F32 models: exact greedy ids.
TEST(ModelReference, Stories260K_OnceUponATime) { check_reference("stories260K__Once_upon_a_time.json", 64); }
TEST(ModelReference, Stories260K_LilyAndTom) { check_reference("stories260K__Lily_and_Tom_went_to_the_park.json", 48); }
TEST(ModelReference, TinyLlamaF32_OnceUponATime) { check_reference("TinyLLama-v0.F32__Once_upon_a_time.json", 48); }

// Quantized models: Nexus quantizes activations to 8 bits per block of 32 for
// its integer kernels (as ggml does) and the reference rounds differently, so
// the first-step logits differ by ~0.5% (asserted within 1e-2 above) and a
// greedy run may part from the reference where two tokens nearly tie; the
// parting step must be such a near-tie (< 1% of the top logit, asserted in
// check_reference). Measured agreement, asserted as the minimum: Q8_0 "Once
// upon a time" 10 tokens (then a 0.03-logit tie), Q4_0 "Once upon a time" 22
// (a 0.004-logit tie), Q4_0 "The little dog" all 32.
TEST(ModelReference, TinyLlamaQ8_0_OnceUponATime) { check_reference("TinyLLama-v0.Q8_0__Once_upon_a_time.json", 10); }
TEST(ModelReference, TinyLlamaQ4_0_OnceUponATime) { check_reference("TinyLLama-v0.Q4_0__Once_upon_a_time.json", 22); }
TEST(ModelReference, TinyLlamaQ4_0_TheLittleDog) { check_reference("TinyLLama-v0.Q4_0__The_little_dog.json", 32); }

// Prefill as one batch and token-by-token decoding give the same logits.
TEST(ModelReference, BatchPrefillEqualsStepwise) {
  NEXUS_REQUIRE_SHARED(model_path, "stories260K.gguf");
  GgufFile gguf(model_path);
  LlamaModel model(gguf);
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378, 432, 383};
  LlamaContext batch(model, 0, 2), step(model, 0, 1);
  std::span<const float> lb = batch.eval(prompt);
  std::vector<float> from_batch(lb.begin(), lb.end());
  std::span<const float> ls;
  for (int32_t id : prompt) ls = step.eval(std::span<const int32_t>(&id, 1));
  ASSERT_EQ(from_batch.size(), ls.size());
  for (size_t i = 0; i < ls.size(); ++i) ASSERT_NEAR(from_batch[i], ls[i], 1e-4f * (1 + std::abs(ls[i]))) << i;
}

TEST(ModelReference, RejectsOverflowAndBadIds) {
  NEXUS_REQUIRE_SHARED(model_path, "stories260K.gguf");
  GgufFile gguf(model_path);
  LlamaModel model(gguf);
  LlamaContext ctx(model, 8, 1);
  const std::vector<int32_t> too_long(9, 1);
  EXPECT_THROW(ctx.eval(too_long), Error);
  const std::vector<int32_t> bad = {1, 100000};
  EXPECT_THROW(ctx.eval(bad), Error);
  EXPECT_THROW(LlamaContext(model, 1 << 20, 1), Error);
}
