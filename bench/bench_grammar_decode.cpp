// Decode speed with and without a JSON schema (constrained decoding), in
// process, no HTTP: rounds of S concurrent greedy streams, alternating a
// round without a grammar and a round where every request carries the
// schema (compiled per request, as the server does), so both see the same
// machine load. tokens/s = completion tokens / wall seconds of the round,
// from the first submit (the schemas are compiled before, as the server
// compiles them on its HTTP threads; the compile time is printed apart).
// Target (issue 22): with the schema within 10% of without, on TinyLLama-v0.
// A warm-up pair of rounds (untimed) builds the vocabulary trie and touches
// the KV pool.
//
// usage: bench_grammar_decode [MODEL.gguf] [THREADS] [GENERATED] [ROUNDS] [STREAMS]
//   default: ../shared/models/TinyLLama-v0.F32.gguf, 2 threads, 100 tokens
//   (at most the context less 24), 5 rounds of each, 1 stream.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "gguf/gguf_file.h"
#include "grammar/json_schema.h"
#include "model/llama_model.h"
#include "tokenizer/tokenizer.h"

using namespace nexus;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kSchema = R"({"type":"object","properties":{
  "name":{"type":"string"},"age":{"type":"integer"},"email":{"type":"string"},
  "tags":{"type":"array","items":{"type":"string"},"maxItems":8},
  "address":{"type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"},
             "zip":{"type":"string"}},"required":["street","city"]},
  "active":{"type":"boolean"},"role":{"enum":["admin","user","guest"]}},
  "required":["name","age","email","tags","address","active","role"]})";

struct Round {
  int64_t tokens = 0;
  double seconds = 0;
  int errors = 0;
};

double g_compile_us = 0;  // the last round's schema compilations, per request

Round run_round(Engine& e, const Tokenizer& tok, int streams, int32_t gen, bool schema, int salt) {
  std::mutex mu;
  std::condition_variable cv;
  int remaining = streams;
  Round r;
  // Requests made (and schemas compiled, each its own Grammar) before the
  // clock starts: the server compiles on its HTTP threads, beside decoding.
  std::vector<GenerationRequest> reqs(static_cast<size_t>(streams));
  const auto c0 = Clock::now();
  for (int i = 0; i < streams; ++i) {
    GenerationRequest& q = reqs[static_cast<size_t>(i)];
    q.prompt = tok.encode("Once upon a time, a girl named Lily " + std::to_string(salt * 16 + i) + " wrote", true);
    q.sampling.temperature = 0;
    q.stop.max_tokens = gen;
    if (schema)
      q.grammar = std::make_shared<const grammar::Grammar>(
          grammar::compile_json_schema(nlohmann::ordered_json::parse(kSchema)));
  }
  if (schema) g_compile_us = std::chrono::duration<double, std::micro>(Clock::now() - c0).count() / streams;
  const auto t0 = Clock::now();
  for (GenerationRequest& q : reqs) {
    e.submit(std::move(q), [&](const GenerationEvent& ev) {
      if (!ev.done) return;
      std::lock_guard lock(mu);
      r.tokens += ev.usage.completion_tokens;
      if (ev.finish == FinishReason::Error) ++r.errors;
      if (--remaining == 0) cv.notify_all();
    });
  }
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return remaining == 0; });
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return r;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : "../shared/models/TinyLLama-v0.F32.gguf";
  const int threads = argc > 2 ? std::atoi(argv[2]) : 2;
  const int32_t gen_arg = argc > 3 ? std::atoi(argv[3]) : 100;
  const int rounds = argc > 4 ? std::atoi(argv[4]) : 5;
  const int streams = argc > 5 ? std::atoi(argv[5]) : 1;
  GgufFile gguf(path);
  auto tok = Tokenizer::from_gguf(gguf);
  LlamaModel model(gguf);
  EngineOptions o;
  o.n_threads = threads;
  Engine e(model, *tok, o);
  const int32_t gen = std::min(gen_arg, e.n_ctx() - 24);  // TinyLLama-v0: a context of 128
  std::printf("model %s, %d threads, %d stream(s), %d generated tokens at most, %d rounds of each\n\n",
              path.c_str(), threads, streams, gen, rounds);
  run_round(e, *tok, streams, gen, false, 1000);  // warm-up
  run_round(e, *tok, streams, gen, true, 1001);
  std::vector<double> plain, constrained;
  std::printf("| round | no schema: tokens, tokens/s | JSON schema: tokens, tokens/s |\n| ---: | ---: | ---: |\n");
  for (int i = 0; i < rounds; ++i) {
    const Round a = run_round(e, *tok, streams, gen, false, 2 * i);
    const Round b = run_round(e, *tok, streams, gen, true, 2 * i + 1);
    plain.push_back(static_cast<double>(a.tokens) / a.seconds);
    constrained.push_back(static_cast<double>(b.tokens) / b.seconds);
    std::printf("| %d | %lld, %.0f | %lld, %.0f%s |\n", i + 1, static_cast<long long>(a.tokens), plain.back(),
                static_cast<long long>(b.tokens), constrained.back(), b.errors ? " (errors)" : "");
    std::fflush(stdout);
  }
  const double p = median(plain), c = median(constrained);
  std::printf("\nmedian tokens/s: no schema %.0f, JSON schema %.0f: %.1f%% of no schema (target >= 90%%)\n", p, c,
              100.0 * c / p);
  std::printf("(compiling the schema, untimed above: %.0f us per request)\n", g_compile_us);
  return 0;
}
