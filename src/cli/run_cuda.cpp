#include "cli/run_cuda.h"

#include <chrono>
#include <cstdio>
#include <numeric>

#include "kernels/cuda_device.h"
#include "util/error.h"

#ifdef NEXUS_HAVE_CUDA
#include "gguf/gguf_file.h"
#include "model/cuda/cuda_forward.h"
#include "model/llama_model.h"
#include "sampling/sampler.h"
#include "tokenizer/tokenizer.h"
#endif

namespace nexus::cli {

void require_cuda_device() {
  std::string why;
  if (cuda_available(&why)) return;
  throw Error(cuda_built() ? "no CUDA device: " + why : std::string(kNoCudaBuildMessage));
}

#ifndef NEXUS_HAVE_CUDA
int run_cuda(const CudaRunArgs&) { throw Error(kNoCudaBuildMessage); }
#else
int run_cuda(const CudaRunArgs& a) {
  using Clock = std::chrono::steady_clock;
  auto secs = [](Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  require_cuda_device();
  const auto t_load = Clock::now();
  const GgufFile& gguf = *a.gguf;
  std::unique_ptr<Tokenizer> tok = Tokenizer::from_gguf(gguf);
  LlamaModel model(gguf);
  const LlamaConfig& c = model.config();
  CudaForwardOptions opt;
  opt.gpu_layers = a.gpu_layers;
  opt.max_seqs = 1;
  opt.max_tokens = 512;
  opt.max_ctx = a.n_ctx > 0 ? a.n_ctx : c.n_ctx_train;
  opt.n_threads = a.n_threads;
  CudaForward fwd(model, opt);
  const double load_s = secs(t_load);
  std::fprintf(stderr, "cuda: %s; %d/%d layers on the GPU, %.1f MiB of weights, graphs %s\n",
               cuda_device_summary(cuda_device_info()).c_str(), fwd.gpu_layers(), c.n_layer,
               static_cast<double>(fwd.device_weight_bytes()) / (1 << 20), fwd.graphs_enabled() ? "on" : "off");

  std::vector<int32_t> history = tok->encode(a.prompt, !a.no_bos);
  if (history.empty()) throw Error("the prompt is empty (and no BOS token was added)");
  // -c bounds prompt + output; the blocks may hold more (rounded up to a block).
  const int64_t max_ctx =
      std::min<int64_t>(static_cast<int64_t>(fwd.max_blocks_per_seq()) * fwd.block_size(), opt.max_ctx);
  if (static_cast<int64_t>(history.size()) >= max_ctx)
    throw Error("the prompt (" + std::to_string(history.size()) + " tokens) does not fit the context of " +
                std::to_string(max_ctx));
  std::vector<int32_t> blocks(static_cast<size_t>(fwd.max_blocks_per_seq()));
  std::iota(blocks.begin(), blocks.end(), 0);

  const SamplingParams& sp = a.sampling;
  const bool greedy_on_gpu = sp.temperature <= 0 && sp.repeat_penalty == 1.0f && sp.frequency_penalty == 0 &&
                             sp.presence_penalty == 0;
  Sampler sampler(sp, c.n_vocab);
  auto step = [&](std::span<const int32_t> toks, int32_t n_past, bool decode) -> int32_t {
    SeqRun run{toks, n_past, blocks, true};
    if (greedy_on_gpu) return decode ? fwd.decode_greedy({&run, 1})[0] : fwd.forward_greedy({&run, 1})[0];
    std::span<const float> lg = fwd.forward({&run, 1});
    std::vector<float> row(lg.begin(), lg.end());
    return sampler.sample(row, history);
  };

  // Prefill in chunks of max_tokens; only the last chunk's logits matter.
  const auto t_prefill = Clock::now();
  const int32_t n_prompt = static_cast<int32_t>(history.size());
  int32_t next = -1;
  for (int32_t p = 0; p < n_prompt; p += opt.max_tokens) {
    const int32_t len = std::min(opt.max_tokens, n_prompt - p);
    std::span<const int32_t> chunk(history.data() + p, static_cast<size_t>(len));
    if (p + len < n_prompt) {
      SeqRun run{chunk, p, blocks, false};
      fwd.forward({&run, 1});
    } else {
      next = step(chunk, p, false);
    }
  }
  const double prefill_s = secs(t_prefill);

  StreamDecoder dec(*tok);
  const auto t_decode = Clock::now();
  int32_t generated = 0;
  const char* finish = "length";
  while (generated < a.n_predict) {
    if (!a.ignore_eos && tok->is_eog(next)) {
      finish = "stop";
      break;
    }
    const std::string text = dec.push(next);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    history.push_back(next);
    ++generated;
    if (generated >= a.n_predict) break;
    if (static_cast<int64_t>(history.size()) >= max_ctx) {
      finish = "context";
      break;
    }
    const int32_t tok_id = next;
    next = step({&tok_id, 1}, static_cast<int32_t>(history.size()) - 1, true);
  }
  const std::string rest = dec.flush();
  std::fwrite(rest.data(), 1, rest.size(), stdout);
  std::fputc('\n', stdout);
  const double decode_s = secs(t_decode);
  std::fprintf(stderr, "\nload:       %.1f ms\n", load_s * 1e3);
  std::fprintf(stderr, "prompt:     %d tokens, %.1f ms, %.1f tokens/s\n", n_prompt, prefill_s * 1e3,
               prefill_s > 0 ? n_prompt / prefill_s : 0.0);
  std::fprintf(stderr, "generation: %d tokens, %.1f ms, %.1f tokens/s\n", generated, decode_s * 1e3,
               decode_s > 0 && generated > 1 ? (generated - 1) / decode_s : 0.0);
  std::fprintf(stderr, "finish:     %s\n", finish);
  return 0;
}
#endif

}  // namespace nexus::cli
