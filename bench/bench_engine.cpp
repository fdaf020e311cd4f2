// Engine benchmark (continuous batching), in-process, no HTTP:
//   1. generated tokens/s with 1, 2, 4, 8, 16 concurrent greedy streams;
//   2. TTFT of interactive requests on an idle engine, and while 8
//      batch-priority streams keep running.
// Prints Markdown tables for docs/benchmarks.md.
//
// usage: bench_engine [MODEL.gguf] [THREADS] [GENERATED] [ROUNDS] [STREAMS] [TEMPERATURE]
//   default model: ../shared/models/TinyLLama-v0.F32.gguf (from the repo root),
//   2 threads, 96 generated tokens per request, 3 rounds per stream count.
//   STREAMS (e.g. 1,8): only those stream counts, and no TTFT part (for
//   profiling one configuration). TEMPERATURE: 0 (default) is greedy; above
//   0, requests sample with that temperature and top_p 0.95 (a chat client's
//   usual settings; the sampler's cost then shows).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "gguf/gguf_file.h"
#include "model/llama_model.h"
#include "tokenizer/tokenizer.h"

using namespace nexus;
using Clock = std::chrono::steady_clock;

namespace {

struct Waiter {
  std::mutex mu;
  std::condition_variable cv;
  int remaining = 0;
  int64_t tokens = 0;
  std::vector<double> ttft;

  EventCallback callback() {
    return [this](const GenerationEvent& ev) {
      if (!ev.done) return;
      std::lock_guard lock(mu);
      tokens += ev.usage.completion_tokens;
      ttft.push_back(ev.timings.ttft_s);
      if (--remaining == 0) cv.notify_all();
    };
  }
  void wait() {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return remaining == 0; });
  }
};

float g_temperature = 0;  // TEMPERATURE

GenerationRequest request(const std::vector<int32_t>& prompt, int32_t max_tokens, int32_t priority) {
  GenerationRequest r;
  r.prompt = prompt;
  r.sampling.temperature = g_temperature;
  r.sampling.top_p = 0.95f;
  r.sampling.seed = 1;
  r.stop.max_tokens = max_tokens;
  r.stop.ignore_eos = true;
  r.priority = priority;
  return r;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p / 100.0 * static_cast<double>(v.size() - 1) + 0.5));
  return v[i];
}

// Distinct prompts (so the prefix cache does not turn the benchmark into a
// cache test): the same story from a different first word.
std::vector<int32_t> prompt_for(const Tokenizer& tok, int i) {
  static const char* kStarts[] = {"Once", "One day", "Lily", "Tom", "The dog", "A cat", "Max", "Sue"};
  return tok.encode(std::string(kStarts[i % 8]) + " went to the park " + std::to_string(i) + " times and", true);
}

void throughput(Engine& e, const Tokenizer& tok, int32_t gen, int rounds, const std::vector<int>& streams) {
  std::printf("| streams | generated tokens | seconds | tokens/s | x one stream |\n| ---: | ---: | ---: | ---: | ---: |\n");
  double one = 0;
  for (int n : streams) {
    Waiter w;
    w.remaining = n * rounds;
    const auto t0 = Clock::now();
    for (int r = 0; r < rounds; ++r) {
      Waiter round;
      round.remaining = n;
      for (int i = 0; i < n; ++i) {
        auto cb = w.callback();
        auto rcb = round.callback();
        e.submit(request(prompt_for(tok, r * 16 + i), gen, kPriorityDefault), [cb, rcb](const GenerationEvent& ev) {
          cb(ev);
          rcb(ev);
        });
      }
      round.wait();
    }
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    const double tps = static_cast<double>(w.tokens) / s;
    if (n == 1) one = tps;
    std::printf("| %d | %lld | %.2f | %.0f | %.2f |\n", n, static_cast<long long>(w.tokens), s, tps, tps / one);
    std::fflush(stdout);
  }
}

// TTFT of `count` interactive requests (prompt ~16 tokens, 1 token out),
// one after another, while `background` batch streams run.
std::vector<double> interactive_ttft(Engine& e, const Tokenizer& tok, int background, int count) {
  std::atomic<bool> stop{false};
  std::atomic<int> live{0};
  std::mutex mu;
  std::condition_variable cv;
  std::function<void(int)> start_batch = [&](int i) {
    ++live;
    e.submit(request(prompt_for(tok, 100 + i), 90, kPriorityBatch), [&, i](const GenerationEvent& ev) {
      if (!ev.done) return;
      if (!stop.load()) start_batch(i);  // keep `background` streams running
      if (--live == 0) cv.notify_all();
    });
  };
  for (int i = 0; i < background; ++i) start_batch(i);
  std::this_thread::sleep_for(std::chrono::milliseconds(background > 0 ? 300 : 0));
  std::vector<double> ttft;
  for (int i = 0; i < count; ++i) {
    Waiter w;
    w.remaining = 1;
    e.submit(request(prompt_for(tok, 200 + i), 1, kPriorityInteractive), w.callback());
    w.wait();
    ttft.push_back(w.ttft[0]);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  stop = true;
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return live.load() == 0; });
  return ttft;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : "../shared/models/TinyLLama-v0.F32.gguf";
  const int threads = argc > 2 ? std::atoi(argv[2]) : 2;
  const int gen_arg = argc > 3 ? std::atoi(argv[3]) : 96;
  const int rounds = argc > 4 ? std::atoi(argv[4]) : 3;
  std::vector<int> streams;
  std::istringstream list(argc > 5 ? argv[5] : "1,2,4,8,16");
  for (std::string item; std::getline(list, item, ',');)
    if (const int n = std::atoi(item.c_str()); n > 0) streams.push_back(n);
  g_temperature = argc > 6 ? static_cast<float>(std::atof(argv[6])) : 0.0f;
  GgufFile gguf(path);
  auto tok = Tokenizer::from_gguf(gguf);
  LlamaModel model(gguf);
  EngineOptions o;
  o.n_threads = threads;
  Engine e(model, *tok, o);
  const int32_t gen = std::min(gen_arg, e.n_ctx() - 24);
  std::printf("model %s, %d threads, n_ctx %d, %d generated tokens per request\n\n", path.c_str(), threads, e.n_ctx(),
              gen);
  {  // Warm-up, untimed: the KV pool's pages are touched on first use (a page
     // fault per 4 KiB), which a running server has long paid.
    Waiter w;
    w.remaining = 16;
    for (int i = 0; i < 16; ++i) e.submit(request(prompt_for(*tok, 1000 + i), gen, kPriorityDefault), w.callback());
    w.wait();
  }
  throughput(e, *tok, gen, rounds, streams);
  if (argc > 5) return 0;

  const int n = 40;
  const std::vector<double> idle = interactive_ttft(e, *tok, 0, n);
  const std::vector<double> busy = interactive_ttft(e, *tok, 8, n);
  std::printf("\n| interactive TTFT (%d requests) | p50 ms | p99 ms |\n| --- | ---: | ---: |\n", n);
  std::printf("| idle engine | %.2f | %.2f |\n", percentile(idle, 50) * 1e3, percentile(idle, 99) * 1e3);
  std::printf("| 8 batch streams running | %.2f | %.2f |\n", percentile(busy, 50) * 1e3, percentile(busy, 99) * 1e3);
  std::printf("\np99 busy / idle = %.2f (target <= 2)\n", percentile(busy, 99) / percentile(idle, 99));
  return 0;
}
