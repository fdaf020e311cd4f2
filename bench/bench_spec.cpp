// Speculative decoding benchmark (docs/speculative.md), in-process, no HTTP:
// each workload runs with speculation off and on, alternating, in the same
// process; prints a Markdown table for docs/benchmarks.md.
//   lookup-repeat  one greedy stream whose prompt is a seed text, the model's own
//                  continuation of it and the seed again (so the answer repeats
//                  the prompt), --spec ngram
//   lookup-plain   one greedy stream on a prompt that does not, --spec ngram
//   edit           one greedy stream with a prediction = its own greedy answer
//                  with 10% of the tokens changed (the shape of a code edit)
//   8-streams      8 concurrent greedy streams of different prompts, --spec ngram
//                  (default adaptive rule: no speculation above 4 running)
//   draft-plain    with DRAFT.gguf: lookup-plain's stream, --draft-model DRAFT
//   draft-4        with DRAFT.gguf: 4 of the 8 streams, --draft-model DRAFT
// Output tokens/s (generated tokens / wall time of the round) and ITL p99.
//
// usage: bench_spec [MODEL.gguf] [THREADS] [GENERATED] [ROUNDS] [DRAFT.gguf]
//   default: ../shared/models/TinyLLama-v0.F32.gguf, 2 threads, 48 tokens, 5 rounds, no draft
//   (TinyLLama-v0's context is 128 tokens: 2 x GENERATED + a few must fit).
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/spec/draft_model.h"
#include "gguf/gguf_file.h"
#include "model/llama_model.h"
#include "tokenizer/tokenizer.h"

using namespace nexus;
using Clock = std::chrono::steady_clock;

namespace {

struct Round {
  double seconds = 0;
  int64_t tokens = 0;
  std::vector<double> itl;  // every gap between two tokens' events
  std::vector<std::vector<int32_t>> outputs;
};

Round run(Engine& e, const std::vector<GenerationRequest>& reqs) {
  std::mutex mu;
  std::condition_variable cv;
  int remaining = static_cast<int>(reqs.size());
  Round r;
  r.outputs.resize(reqs.size());
  std::vector<Clock::time_point> last(reqs.size());
  const Clock::time_point start = Clock::now();
  for (size_t i = 0; i < reqs.size(); ++i) {
    last[i] = start;
    e.submit(reqs[i], [&, i](const GenerationEvent& ev) {
      std::lock_guard lock(mu);
      const Clock::time_point now = Clock::now();
      if (ev.token >= 0) {
        if (!r.outputs[i].empty()) r.itl.push_back(std::chrono::duration<double>(now - last[i]).count());
        r.outputs[i].push_back(ev.token);
        last[i] = now;
      }
      if (ev.done && --remaining == 0) cv.notify_all();
    });
  }
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return remaining == 0; });
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (const auto& o : r.outputs) r.tokens += static_cast<int64_t>(o.size());
  return r;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double p99(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::min(v.size() - 1, static_cast<size_t>(0.99 * static_cast<double>(v.size())))];
}

GenerationRequest greedy(std::vector<int32_t> prompt, int32_t n) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.sampling.temperature = 0;
  r.stop.max_tokens = n;
  r.stop.ignore_eos = true;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : "../shared/models/TinyLLama-v0.F32.gguf";
  const int threads = argc > 2 ? std::atoi(argv[2]) : 2;
  const int gen = argc > 3 ? std::atoi(argv[3]) : 48;
  const int rounds = argc > 4 ? std::atoi(argv[4]) : 5;
  GgufFile gguf(path);
  auto tok = Tokenizer::from_gguf(gguf);
  LlamaModel model(gguf);
  const int32_t n_vocab = model.config().n_vocab;
  std::unique_ptr<GgufFile> draft_gguf;
  std::unique_ptr<LlamaModel> draft;
  if (argc > 5) {
    draft_gguf = std::make_unique<GgufFile>(argv[5]);
    spec::check_same_vocabulary(*tok, *Tokenizer::from_gguf(*draft_gguf));
    draft = std::make_unique<LlamaModel>(*draft_gguf);
  }

  const std::string story =
      "Once upon a time, there was a little girl named Lily. She loved to play in the park with her dog Max. ";
  struct Workload {
    std::string name;
    std::vector<GenerationRequest> reqs;
    SpecProposer proposer;
    bool draft = false;  // with the draft model (and no n-gram lookup)
  };
  std::vector<Workload> workloads;
  {  // lookup-repeat: seed text + the model's own greedy continuation of it, then the seed text again
    EngineOptions o;
    o.n_threads = threads;
    Engine e(model, *tok, o);
    const std::vector<int32_t> seed = tok->encode("Once upon a time", true);
    const std::vector<int32_t> cont = run(e, {greedy(seed, gen)}).outputs[0];
    std::vector<int32_t> prompt = seed;
    prompt.insert(prompt.end(), cont.begin(), cont.end());
    prompt.insert(prompt.end(), seed.begin() + (tok->add_bos_default() ? 1 : 0), seed.end());
    workloads.push_back({"lookup-repeat", {greedy(prompt, gen)}, SpecProposer::Ngram});
  }
  workloads.push_back({"lookup-plain", {greedy(tok->encode("Tom had a red truck", true), gen)}, SpecProposer::Ngram});
  {  // edit: the prediction is the greedy answer with 10% of the tokens changed
    GenerationRequest r = greedy(tok->encode("The little dog", true), gen);
    EngineOptions o;
    o.n_threads = threads;
    Engine e(model, *tok, o);
    std::vector<int32_t> p = run(e, {r}).outputs[0];
    std::mt19937 rng(1);
    for (size_t i = 0; i < p.size(); ++i)
      if (rng() % 10 == 0) p[i] = static_cast<int32_t>(rng() % static_cast<uint32_t>(n_vocab));
    r.prediction = p;
    workloads.push_back({"edit (prediction)", {r}, SpecProposer::None});
  }
  {
    std::vector<GenerationRequest> reqs;
    const char* starts[] = {"Once upon a time", "Lily and Max", "The sun", "Tom had a red truck",
                            "One day", "A big cat", "The girl", "In the park"};
    for (int i = 0; i < 8; ++i) reqs.push_back(greedy(tok->encode(i % 2 ? story + starts[i] : starts[i], true), gen));
    // (odd ones repeat part of their prompt: some lookup hits)
    workloads.push_back({"8 streams", reqs, SpecProposer::Ngram});
    if (draft) {
      workloads.push_back({"draft-plain", {greedy(tok->encode("Tom had a red truck", true), gen)}, SpecProposer::None, true});
      workloads.push_back({"draft-4 streams", std::vector<GenerationRequest>(reqs.begin(), reqs.begin() + 4),
                           SpecProposer::None, true});
    }
  }

  std::printf("| workload | off: tok/s | on: tok/s | speedup | off: ITL p99 ms | on: ITL p99 ms | accepted/proposed | same output |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (const Workload& w : workloads) {
    std::vector<double> tps[2], itl[2];
    std::vector<std::vector<int32_t>> outs[2];
    int64_t proposed = 0, accepted = 0;
    for (int round = 0; round < rounds + 1; ++round) {
      for (int on = 0; on < 2; ++on) {
        EngineOptions o;
        o.n_threads = threads;
        if (on) o.spec.proposer = w.proposer;
        else o.spec.max_seqs = 0;  // no speculation at all (not even the prediction)
        if (on && w.draft) o.spec.draft_model = draft.get();
        Engine e(model, *tok, o);
        const Round r = run(e, w.reqs);
        if (round == 0) continue;  // warm-up
        tps[on].push_back(static_cast<double>(r.tokens) / r.seconds);
        itl[on].insert(itl[on].end(), r.itl.begin(), r.itl.end());
        outs[on] = r.outputs;
        if (on) {
          const EngineStats s = e.stats();
          proposed += s.spec_proposed_ngram + s.spec_proposed_prediction + s.spec_proposed_draft;
          accepted += s.spec_accepted_ngram + s.spec_accepted_prediction + s.spec_accepted_draft;
        }
      }
    }
    const double off = median(tps[0]), on = median(tps[1]);
    std::printf("| %s | %.1f | %.1f | %.2fx | %.3f | %.3f | %lld/%lld | %s |\n", w.name.c_str(), off, on, on / off,
                1e3 * p99(itl[0]), 1e3 * p99(itl[1]), static_cast<long long>(accepted),
                static_cast<long long>(proposed), outs[0] == outs[1] ? "yes" : "NO");
    std::fflush(stdout);
  }
  return 0;
}
