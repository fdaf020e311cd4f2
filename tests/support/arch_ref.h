// The llama.cpp reference files of ../shared/models/arch (arch/README.md):
// reading a NAME.ref.json, running a model teacher-forced and free-running
// over its prompt, and comparing logits. Shared by test_arch_reference.cpp
// (weight types) and test_arch_families.cpp (model families).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace nexus {
class LlamaModel;
}

namespace nexus::test {

struct ArchRef {
  std::vector<int32_t> prompt_ids;            // BOS first
  std::vector<int32_t> greedy_ids;            // llama.cpp's 32 greedy ids
  std::vector<std::vector<float>> logits;     // [32][n_vocab]: logits[k] after prompt + greedy_ids[:k]
};

ArchRef load_arch_ref(const std::string& path);

// RMS and largest absolute difference over every value of two [steps][n_vocab] sets.
struct LogitDiff {
  double rms = 0, max = 0;
};
LogitDiff logit_diff(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b);

int32_t argmax(std::span<const float> v);
// Top-1 minus top-2 of a logits row.
float top2_margin(const std::vector<float>& v);

// The logits after prompt + greedy_ids[:k] for every step k, from one batch of
// prompt + greedy_ids[:steps - 1] (row prompt.size() - 1 + k; causal
// attention, and matmul gives each row the same bits whatever the batch).
std::vector<std::vector<float>> teacher_forced_logits(const LlamaModel& model, const ArchRef& ref);

// Nexus's own greedy ids from the prompt, as many as the reference has.
std::vector<int32_t> free_running_greedy(const LlamaModel& model, const ArchRef& ref);

// The comparison both reference tests make, as GoogleTest expectations:
// teacher-forced logits within rms_tol RMS and 5 x rms_tol at most (printed
// under `label`); free-running greedy ids equal to the reference's for every
// step (exact_greedy), or else for at least 24 steps or up to the first step
// where the reference's top-2 margin is below 5 x rms_tol (a near-tie either
// side may break).
void expect_matches_reference(const LlamaModel& model, const ArchRef& ref, const std::string& label, double rms_tol,
                              bool exact_greedy);

}  // namespace nexus::test
