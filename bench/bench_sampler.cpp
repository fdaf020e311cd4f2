// Sampler cost per token over a 32000-token vocabulary (Llama 2 size), for
// the chains a server sees: greedy, llama.cpp's defaults, top_p alone; and
// the cost of building one, which the engine thread pays per request.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "sampling/sampler.h"

namespace {

constexpr int32_t kVocab = 32000;

std::vector<float> make_logits() {
  std::mt19937 rng(1);
  std::normal_distribution<float> d(0.0f, 3.0f);  // spread like real logits
  std::vector<float> l(kVocab);
  for (float& x : l) x = d(rng);
  return l;
}

void run(benchmark::State& state, nexus::SamplingParams p) {
  p.seed = 1;
  nexus::Sampler s(p, kVocab);
  const std::vector<float> logits = make_logits();
  std::vector<int32_t> history(64);
  for (int i = 0; i < 64; ++i) history[i] = i * 37;
  std::vector<float> row;
  for (auto _ : state) {
    row = logits;
    benchmark::DoNotOptimize(s.sample(row, history));
  }
}

void BM_Greedy(benchmark::State& state) {
  nexus::SamplingParams p;
  p.temperature = 0;
  run(state, p);
}

void BM_LlamaCppDefaults(benchmark::State& state) {
  nexus::SamplingParams p;
  p.temperature = 0.8f;
  p.top_k = 40;
  p.top_p = 0.95f;
  p.min_p = 0.05f;
  p.repeat_penalty = 1.1f;
  run(state, p);
}

void BM_TopPOnly(benchmark::State& state) {
  nexus::SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.9f;
  run(state, p);
}

void BM_TemperatureOnly(benchmark::State& state) {
  nexus::SamplingParams p;
  p.temperature = 1.0f;
  run(state, p);
}

// A request's sampler, built on the engine thread when the request arrives.
void BM_Construct(benchmark::State& state) {
  nexus::SamplingParams p;
  p.temperature = 0;
  p.seed = 1;
  for (auto _ : state) {
    nexus::Sampler s(p, kVocab);
    benchmark::DoNotOptimize(&s);
  }
}

}  // namespace

BENCHMARK(BM_Construct);
BENCHMARK(BM_Greedy);
BENCHMARK(BM_LlamaCppDefaults);
BENCHMARK(BM_TopPOnly);
BENCHMARK(BM_TemperatureOnly);
BENCHMARK_MAIN();
