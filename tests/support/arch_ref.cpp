#include "support/arch_ref.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "model/llama_context.h"
#include "model/llama_model.h"

namespace nexus::test {

ArchRef load_arch_ref(const std::string& path) {
  std::ifstream in(path);
  const nlohmann::json j = nlohmann::json::parse(in);
  ArchRef r;
  r.prompt_ids = j.at("prompt_ids").get<std::vector<int32_t>>();
  r.greedy_ids = j.at("greedy_ids").get<std::vector<int32_t>>();
  r.logits = j.at("logits").get<std::vector<std::vector<float>>>();
  return r;
}

LogitDiff logit_diff(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  double sum = 0, max = 0;
  size_t n = 0;
  for (size_t k = 0; k < a.size(); ++k)
    for (size_t i = 0; i < a[k].size(); ++i) {
      const double d = std::abs(static_cast<double>(a[k][i]) - b[k][i]);
      sum += d * d;
      max = std::max(max, d);
      ++n;
    }
  return {n ? std::sqrt(sum / static_cast<double>(n)) : 0.0, max};
}

int32_t argmax(std::span<const float> v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

float top2_margin(const std::vector<float>& v) {
  std::vector<float> s = v;
  std::partial_sort(s.begin(), s.begin() + 2, s.end(), std::greater<>());
  return s[0] - s[1];
}

std::vector<std::vector<float>> teacher_forced_logits(const LlamaModel& model, const ArchRef& ref) {
  std::vector<int32_t> tokens = ref.prompt_ids;
  tokens.insert(tokens.end(), ref.greedy_ids.begin(), ref.greedy_ids.end() - 1);
  LlamaContext ctx(model, static_cast<int32_t>(tokens.size()) + 1, 2);
  const std::span<const float> all = ctx.eval_all(tokens);
  const size_t n_vocab = static_cast<size_t>(model.config().n_vocab);
  std::vector<std::vector<float>> out;
  for (size_t k = 0; k < ref.greedy_ids.size(); ++k) {
    const size_t row = ref.prompt_ids.size() - 1 + k;
    out.emplace_back(all.begin() + static_cast<ptrdiff_t>(row * n_vocab),
                     all.begin() + static_cast<ptrdiff_t>((row + 1) * n_vocab));
  }
  return out;
}

std::vector<int32_t> free_running_greedy(const LlamaModel& model, const ArchRef& ref) {
  LlamaContext ctx(model, static_cast<int32_t>(ref.prompt_ids.size() + ref.greedy_ids.size()) + 1, 2);
  std::span<const float> logits = ctx.eval(ref.prompt_ids);
  std::vector<int32_t> out;
  while (out.size() < ref.greedy_ids.size()) {
    const int32_t id = argmax(logits);
    out.push_back(id);
    logits = ctx.eval(std::span<const int32_t>(&id, 1));
  }
  return out;
}

void expect_matches_reference(const LlamaModel& model, const ArchRef& ref, const std::string& label, double rms_tol,
                              bool exact_greedy) {
  const LogitDiff d = logit_diff(teacher_forced_logits(model, ref), ref.logits);
  std::printf("%-20s logits vs llama.cpp: RMS %.5f, max %.5f (bound %.4f RMS)\n", label.c_str(), d.rms, d.max, rms_tol);
  EXPECT_LE(d.rms, rms_tol) << label;
  EXPECT_LE(d.max, 5 * rms_tol) << label;

  const std::vector<int32_t> got = free_running_greedy(model, ref);
  size_t agree = 0;
  while (agree < got.size() && got[agree] == ref.greedy_ids[agree]) ++agree;
  if (exact_greedy) {
    EXPECT_EQ(got, ref.greedy_ids) << label << ": greedy ids part from llama.cpp's at step " << agree;
    return;
  }
  size_t near_tie = ref.greedy_ids.size();
  for (size_t k = 0; k < ref.logits.size(); ++k)
    if (top2_margin(ref.logits[k]) < 5 * rms_tol) {
      near_tie = k;
      break;
    }
  EXPECT_GE(agree, std::min<size_t>(24, near_tie)) << label << ": greedy ids part from llama.cpp's at step " << agree
                                                   << " (first near-tie of the reference at step " << near_tie << ")";
}

}  // namespace nexus::test
