// Tokenizer throughput: encoding ~4 KB of English prose with a 32000-token
// SentencePiece vocabulary and with GPT-2's byte-level BPE, and streaming
// the ids back through StreamDecoder. Run from the repository root (the
// vocabularies are read from ../shared/models/tokenizers).
#include <benchmark/benchmark.h>

#include <memory>
#include <string>

#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace {

std::string prose() {
  std::string s;
  while (s.size() < 4096) {
    s += "Once upon a time, there was a little girl named Lily. She loved to play outside "
         "in the park with her friends. One day, she found a shiny red ball under a tree, "
         "and she said: \"Look! It's 3.14 times bigger than mine!\" \xF0\x9F\x98\x80\n";
  }
  return s;
}

struct Loaded {
  std::unique_ptr<nexus::GgufFile> file;
  std::unique_ptr<nexus::Tokenizer> tok;
};

Loaded load(const std::string& name) {
  Loaded l;
  l.file = std::make_unique<nexus::GgufFile>("../shared/models/tokenizers/ggml-vocab-" + name + ".gguf");
  l.tok = nexus::Tokenizer::from_gguf(*l.file);
  return l;
}

void encode(benchmark::State& state, const std::string& name) {
  const Loaded l = load(name);
  const std::string text = prose();
  for (auto _ : state) benchmark::DoNotOptimize(l.tok->encode(text, true));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(text.size()));
}

void stream_decode(benchmark::State& state) {
  const Loaded l = load("llama-spm");
  const auto ids = l.tok->encode(prose(), false);
  for (auto _ : state) {
    nexus::StreamDecoder dec(*l.tok);
    size_t n = 0;
    for (int32_t id : ids) n += dec.push(id).size();
    benchmark::DoNotOptimize(n);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(ids.size()));
}

BENCHMARK_CAPTURE(encode, spm_llama, std::string("llama-spm"))->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(encode, bpe_gpt2, std::string("gpt-2"))->Unit(benchmark::kMicrosecond);
BENCHMARK(stream_decode)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
