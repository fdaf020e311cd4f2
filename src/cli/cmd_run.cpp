// `nexus run`: generate text from a prompt with one model, streaming it to
// stdout, then report load time, prefill and decode speed on stderr.
#include <fmt/format.h>

#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <limits>
#include <mutex>
#include <unistd.h>

#include "cli/command.h"
#include "cli/open_model.h"
#include "cli/run_cuda.h"
#include "cli/seed_arg.h"
#include "engine/engine.h"
#include "gguf/gguf_file.h"
#include "model/llama_config.h"
#include "model/llama_model.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace nexus::cli {
namespace {

struct RunArgs {
  std::string model;
  std::string prompt;
  int32_t n_predict = 256;
  int32_t n_threads = 0;
  int32_t n_ctx = 0;
  std::string seed = "-1";  // -1: random (printed)
  std::vector<std::string> stop;
  bool no_bos = false;
  bool ignore_eos = false;
  std::string device = "cpu";
  int32_t gpu_layers = -1;
  SamplingParams sampling;
  CLI::Option* prompt_opt = nullptr;
};

volatile std::sig_atomic_t g_interrupted = 0;
extern "C" void on_sigint(int) { g_interrupted = 1; }

// Events cross from the engine thread to the main thread here, so a slow
// terminal never stalls the engine (the callback must not block).
struct EventChannel {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<GenerationEvent> events;

  void push(const GenerationEvent& ev) {
    {
      std::lock_guard lock(mu);
      events.push_back(ev);
    }
    cv.notify_one();
  }
};

std::string read_stdin_prompt() {
  std::string text{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
  if (!text.empty() && text.back() == '\n') text.pop_back();  // `echo ... |` adds one
  if (!text.empty() && text.back() == '\r') text.pop_back();
  return text;
}

int run(RunArgs& a) {
  using Clock = std::chrono::steady_clock;
  const auto t_load = Clock::now();
  if (a.device == "cuda") {
    if (!a.stop.empty()) throw UsageError("--stop: not supported with --device cuda yet");
    // Before reading the model or stdin: no GPU means a quick, clear failure.
    require_cuda_device();
  }
  const OpenedModel opened = open_model(a.model);
  const GgufFile& gguf = *opened.gguf;
  check_ctx_size(a.n_ctx, LlamaConfig::from_gguf(gguf).n_ctx_train);
  a.sampling.seed = resolve_seed(a.seed, a.sampling.temperature > 0 ? "nexus run" : nullptr);
  if (!a.prompt_opt->count()) a.prompt = read_stdin_prompt();
  if (a.device == "cuda") {
    CudaRunArgs ca;
    ca.gguf = &gguf;
    ca.prompt = a.prompt;
    ca.n_predict = a.n_predict;
    ca.n_ctx = a.n_ctx;
    ca.gpu_layers = a.gpu_layers;
    ca.n_threads = a.n_threads;
    ca.no_bos = a.no_bos;
    ca.ignore_eos = a.ignore_eos;
    ca.sampling = a.sampling;
    return run_cuda(ca);
  }

  std::unique_ptr<Tokenizer> tok = Tokenizer::from_gguf(gguf);
  LlamaModel model(gguf);
  EventChannel channel;  // declared before the engine: outlives its thread
  EngineOptions eopts;
  eopts.n_threads = a.n_threads;
  eopts.n_ctx = a.n_ctx;
  eopts.max_seqs = 1;  // one generation: the KV pool holds one context
  Engine engine(model, *tok, eopts);
  const double load_ms = std::chrono::duration<double, std::milli>(Clock::now() - t_load).count();

  GenerationRequest req;
  req.prompt = tok->encode(a.prompt, !a.no_bos);
  req.sampling = a.sampling;
  req.stop.max_tokens = a.n_predict;
  // The context holds the prompt and the output together.
  const int64_t room = int64_t{engine.n_ctx()} - static_cast<int64_t>(req.prompt.size());
  if (room > 0 && a.n_predict > room)
    std::fprintf(stderr, "note: -n %d: the %zu-token prompt leaves room for %lld tokens in the %d-token context (-c)\n",
                 a.n_predict, req.prompt.size(), static_cast<long long>(room), engine.n_ctx());
  req.stop.stop = a.stop;
  req.stop.ignore_eos = a.ignore_eos;

  std::shared_ptr<RequestHandle> handle =
      engine.submit(std::move(req), [&channel](const GenerationEvent& ev) { channel.push(ev); });
  if (!handle) throw Error("the engine refused the request (queue full)");

  std::signal(SIGINT, on_sigint);  // Ctrl-C cancels the generation, then reports
  GenerationEvent last;
  bool printed_any = false, ends_with_newline = false;
  for (bool done = false; !done;) {
    std::deque<GenerationEvent> batch;
    {
      std::unique_lock lock(channel.mu);
      channel.cv.wait_for(lock, std::chrono::milliseconds(50), [&] { return !channel.events.empty(); });
      batch.swap(channel.events);
    }
    if (g_interrupted) handle->cancel();
    for (GenerationEvent& ev : batch) {
      if (!ev.text.empty()) {
        std::fwrite(ev.text.data(), 1, ev.text.size(), stdout);
        std::fflush(stdout);
        printed_any = true;
        ends_with_newline = ev.text.back() == '\n';
      }
      if (ev.done) {
        last = std::move(ev);
        done = true;
      }
    }
  }
  std::signal(SIGINT, SIG_DFL);
  if (printed_any && !ends_with_newline && isatty(STDOUT_FILENO)) std::fputc('\n', stdout);
  std::fflush(stdout);

  if (last.finish == FinishReason::Error) throw Error(last.error);
  const Usage& u = last.usage;
  const Timings& t = last.timings;
  auto rate = [](double n, double s) { return s > 0 ? fmt::format("{:.1f} tokens/s", n / s) : std::string("n/a"); };
  std::fprintf(stderr, "\n");
  std::fprintf(stderr, "load:       %.1f ms\n", load_ms);
  std::fprintf(stderr, "prompt:     %d tokens, %.1f ms, %s\n", u.prompt_tokens, t.prefill_s * 1e3,
               rate(u.prompt_tokens, t.prefill_s).c_str());
  std::fprintf(stderr, "TTFT:       %.1f ms\n", t.ttft_s * 1e3);
  // decode_s spans first to last token: completion_tokens - 1 decode steps.
  std::fprintf(stderr, "generation: %d tokens, %.1f ms, %s\n", u.completion_tokens, t.decode_s * 1e3,
               rate(u.completion_tokens > 1 ? u.completion_tokens - 1 : 0, t.decode_s).c_str());
  std::fprintf(stderr, "finish:     %s\n", finish_reason_name(last.finish));
  return last.finish == FinishReason::Cancelled ? 130 : 0;
}

std::function<int()> setup(CLI::App& sub) {
  auto a = std::make_shared<RunArgs>();
  // Sampling defaults follow llama.cpp's command line.
  a->sampling.temperature = 0.8f;
  a->sampling.top_k = 40;
  a->sampling.top_p = 0.95f;
  a->sampling.min_p = 0.05f;
  constexpr int32_t kMaxInt = std::numeric_limits<int32_t>::max();
  sub.add_option("-m,--model", a->model, kModelHelp)->check(model_path());
  a->prompt_opt = sub.add_option("-p,--prompt", a->prompt, "prompt text (default: read from stdin)");
  sub.add_option("-n,--n-predict", a->n_predict, "tokens to generate, at most")
      ->capture_default_str()
      ->check(range(1, kMaxInt));
  // The sampler's own bounds (Sampler::validate), checked here so that a bad
  // value is a usage error naming the option.
  sub.add_option("--temp", a->sampling.temperature, "temperature; 0 = greedy")
      ->capture_default_str()
      ->check(at_least(0));
  sub.add_option("--top-k", a->sampling.top_k, "top-k; 0 = off")->capture_default_str()->check(range(0, kMaxInt));
  sub.add_option("--top-p", a->sampling.top_p, "top-p (nucleus); 1 = off")
      ->capture_default_str()
      ->check(range(0.0, 1.0));
  sub.add_option("--min-p", a->sampling.min_p, "min-p; 0 = off")->capture_default_str()->check(range(0.0, 1.0));
  sub.add_option("--repeat-penalty", a->sampling.repeat_penalty, "repeat penalty; 1 = off")
      ->capture_default_str()
      ->check(above(0));
  sub.add_option("--repeat-last-n", a->sampling.repeat_last_n, "tokens the penalty looks at; -1 = all")
      ->capture_default_str()
      ->check(range(-1, kMaxInt));
  sub.add_option("--frequency-penalty", a->sampling.frequency_penalty, "OpenAI frequency penalty")
      ->capture_default_str()
      ->check(finite_number());
  sub.add_option("--presence-penalty", a->sampling.presence_penalty, "OpenAI presence penalty")
      ->capture_default_str()
      ->check(finite_number());
  add_seed_option(sub, a->seed, "RNG seed; -1 = random (printed to stderr)");
  sub.add_option("--stop", a->stop, "stop string (repeatable); not printed")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  sub.add_option("-t,--threads", a->n_threads, "kernel threads; 0 = all cores")
      ->capture_default_str()
      ->check(range(0, 4096));
  sub.add_option("-c,--ctx-size", a->n_ctx, "context size in tokens (prompt + output); 0 = the model's")
      ->capture_default_str()
      ->check(range(0, kMaxInt));
  sub.add_option("--device", a->device, "cpu, or cuda (the GPU backend, docs/cuda.md)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  sub.add_option("--gpu-layers", a->gpu_layers, "with --device cuda: layers on the GPU, the rest on the CPU; -1 = all")
      ->capture_default_str()
      ->check(range(-1, kMaxInt));
  sub.add_flag("--no-bos", a->no_bos, "do not add the BOS token to the prompt");
  sub.add_flag("--ignore-eos", a->ignore_eos, "keep generating past end-of-generation tokens");
  return [a] { return run(*a); };
}

const CommandRegistrar reg{{"run", "generate text from a prompt", setup}};

}  // namespace
}  // namespace nexus::cli
