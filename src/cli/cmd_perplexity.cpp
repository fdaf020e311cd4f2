// `nexus perplexity`: perplexity of a model over a text file, the way
// llama-perplexity computes it (src/model/perplexity.h), and with
// --kl-divergence-base how far its next-token distributions are from a base
// model's (src/model/kl_divergence.h). docs/perplexity.md explains the output.
//
//   nexus perplexity -m MODEL -f TEXT [-c 512] [-b 2048] [-t N] [--chunks N]
//                    [--kl-divergence-base BASE.gguf]
//
// stdout: the running estimate after each chunk, `[1]x.xxxx,[2]...,` as
// llama-perplexity prints it (a progress line instead when stdout is a
// terminal), then `Final estimate: PPL = X +/- U`, then with a base the KL
// divergence block. stderr: what was run and how long a chunk takes.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <memory>
#include <unistd.h>

#include "cli/command.h"
#include "cli/open_model.h"
#include "cli/usage_error.h"
#include "gguf/gguf_file.h"
#include "model/kl_divergence.h"
#include "model/llama_context.h"
#include "model/llama_model.h"
#include "model/perplexity.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace nexus::cli {
namespace {

struct PerplexityArgs {
  std::string model, text_file, base;
  int32_t n_ctx = 512;
  int32_t n_batch = 2048;  // llama.cpp's default; clamped to the context
  int32_t n_threads = 0;
  int32_t n_chunks = 0;    // 0: all
  CLI::Option* ctx_opt = nullptr;
};

// A GGUF file opened as a model: its mapping, tokenizer and weights.
struct OpenModel {
  explicit OpenModel(std::unique_ptr<GgufFile> file)
      : gguf(std::move(file)), tok(Tokenizer::from_gguf(*gguf)),
        model(std::make_unique<LlamaModel>(*gguf)) {}
  std::unique_ptr<GgufFile> gguf;
  std::unique_ptr<Tokenizer> tok;
  std::unique_ptr<LlamaModel> model;
};

// The file's bytes, less one final newline (llama.cpp's -f drops it too).
std::string read_text(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) throw Error("text file not found: " + path);
  if (fs::is_directory(path, ec)) throw Error("text file " + path + " is a directory");
  std::ifstream in(path, std::ios::binary);
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad() || !in.is_open()) throw Error("cannot read text file " + path);
  if (text.empty()) throw Error("text file " + path + " is empty");
  if (text.back() == '\n') text.pop_back();
  return text;
}

// The base must predict over the same token ids from the same tokens.
void require_same_tokenizer(const OpenModel& m, const OpenModel& base, const std::vector<int32_t>& tokens,
                            const std::string& text) {
  const int32_t nv = m.model->config().n_vocab, nv_base = base.model->config().n_vocab;
  if (nv != nv_base)
    throw Error(fmt::format("the base model's vocabulary has {} tokens, the model's {}: KL divergence needs "
                            "both to use the same tokenizer",
                            nv_base, nv));
  const std::vector<int32_t> base_tokens = base.tok->encode(text, true);
  if (base_tokens != tokens) {
    size_t i = 0;
    while (i < tokens.size() && i < base_tokens.size() && tokens[i] == base_tokens[i]) ++i;
    throw Error(fmt::format("the base model tokenizes the text differently (first difference at token {}; "
                            "{} tokens against {}): KL divergence needs both to use the same tokenizer",
                            i, base_tokens.size(), tokens.size()));
  }
}

// -c as given, or 512 lowered to what the models were trained for.
int32_t context_size(const PerplexityArgs& a, int32_t n_ctx_train) {
  if (a.ctx_opt->count() == 0 && a.n_ctx > n_ctx_train) {
    std::fprintf(stderr, "perplexity: note: the model's training context is %d tokens; using -c %d\n", n_ctx_train,
                 n_ctx_train);
    return n_ctx_train;
  }
  if (a.n_ctx > n_ctx_train)
    throw UsageError(fmt::format("-c: {} exceeds the training context of {} tokens (nexus runs no position past it): "
                            "pass -c {} or less",
                            a.n_ctx, n_ctx_train, n_ctx_train));
  return a.n_ctx;
}

void print_kl_block(const KlDivergenceStats& s, const std::string& base_path) {
  const Estimate ppl = s.ppl(), ppl_base = s.ppl_base(), ratio = s.log_ppl_ratio(), kld = s.mean_kld();
  const Estimate top = s.same_top(), dp = s.rms_p_diff(), dz = s.rms_logit_diff();
  std::string out = "\n====== KL divergence from the base model ======\n";
  out += fmt::format("Base model                    : {}\n", base_path);
  out += fmt::format("Scored positions              : {}\n", s.count());
  out += fmt::format("Mean PPL(Q)                   : {:10.6f} ± {:10.6f}\n", ppl.value, ppl.uncertainty);
  out += fmt::format("Mean PPL(base)                : {:10.6f} ± {:10.6f}\n", ppl_base.value, ppl_base.uncertainty);
  out += fmt::format("Cor(ln(PPL(Q)), ln(PPL(base))): {:6.2f}%\n", 100 * s.nll_correlation());
  out += fmt::format("Mean ln(PPL(Q)/PPL(base))     : {:10.6f} ± {:10.6f}\n", ratio.value, ratio.uncertainty);
  out += fmt::format("Mean    KLD: {:10.6f} ± {:10.6f}\n", kld.value, kld.uncertainty);
  out += fmt::format("Maximum KLD: {:10.6f}\n", s.max_kld);
  out += fmt::format("Same top p: {:6.3f} ± {:5.3f} %\n", 100 * top.value, 100 * top.uncertainty);
  out += fmt::format("RMS Δp    : {:6.3f} ± {:5.3f} %\n", 100 * dp.value, 100 * dp.uncertainty);
  out += fmt::format("Max |Δp|  : {:6.3f} %\n", 100 * s.max_abs_p_diff);
  out += fmt::format("RMS Δlogit: {:10.6f} ± {:10.6f}\n", dz.value, dz.uncertainty);
  std::fputs(out.c_str(), stdout);
}

int run(const PerplexityArgs& a) {
  using Clock = std::chrono::steady_clock;
  OpenModel m(open_model(a.model).gguf);
  const std::string text = read_text(a.text_file);

  const std::vector<int32_t> tokens = m.tok->encode(text, true);
  std::unique_ptr<OpenModel> base;
  int32_t n_ctx_train = m.model->config().n_ctx_train;
  if (!a.base.empty()) {
    base = std::make_unique<OpenModel>(open_model(a.base, "base model").gguf);
    require_same_tokenizer(m, *base, tokens, text);
    n_ctx_train = std::min(n_ctx_train, base->model->config().n_ctx_train);
  }
  const int32_t n_ctx = context_size(a, n_ctx_train);
  const PerplexityChunks plan = plan_perplexity_chunks(tokens.size(), n_ctx, a.n_chunks);
  const int32_t n_batch = std::min(a.n_batch, n_ctx);
  // llama.cpp puts BOS first in every chunk when the vocabulary adds one.
  const int32_t bos = m.tok->add_bos_default() ? m.tok->bos_id() : -1;
  const int32_t n_vocab = m.model->config().n_vocab;

  LlamaContext ctx(*m.model, n_ctx, a.n_threads);
  std::unique_ptr<LlamaContext> base_ctx;
  if (base) base_ctx = std::make_unique<LlamaContext>(*base->model, n_ctx, a.n_threads);
  std::fprintf(stderr,
               "perplexity: %zu tokens; %d chunks of %d tokens, the last %d of each scored; batch %d%s\n",
               tokens.size(), plan.n_chunks, n_ctx, plan.n_scored(), n_batch,
               base ? ", with the base model's KL divergence" : "");

  const bool tty = isatty(STDOUT_FILENO) != 0;
  MeanAccumulator nll;
  KlDivergenceStats kl;
  const auto t_start = Clock::now();
  for (int32_t c = 0; c < plan.n_chunks; ++c) {
    const std::span<const int32_t> chunk(tokens.data() + static_cast<size_t>(c) * n_ctx, static_cast<size_t>(n_ctx));
    const std::vector<float> logits = eval_chunk_scored(ctx, chunk, bos, plan.first, n_batch);
    std::vector<float> base_logits;
    if (base_ctx) base_logits = eval_chunk_scored(*base_ctx, chunk, bos, plan.first, n_batch);
    for (int32_t j = 0; j < plan.n_scored(); ++j) {
      const std::span<const float> row(logits.data() + static_cast<size_t>(j) * n_vocab, static_cast<size_t>(n_vocab));
      const int32_t next = chunk[static_cast<size_t>(plan.first + j + 1)];
      nll.add(token_nll(row, next));
      if (base_ctx)
        kl.add(row, std::span<const float>(base_logits.data() + static_cast<size_t>(j) * n_vocab, row.size()), next);
    }
    const double elapsed = std::chrono::duration<double>(Clock::now() - t_start).count();
    if (c == 0)
      std::fprintf(stderr, "perplexity: %.2f seconds per pass - ETA %.2f minutes\n", elapsed,
                   elapsed * plan.n_chunks / 60.0);
    const double ppl = perplexity_of(nll).value;
    if (tty) {
      const double eta = elapsed / (c + 1) * (plan.n_chunks - c - 1);
      std::printf("\r\033[Kchunk %d/%d  PPL %.4f  ETA %.0f s", c + 1, plan.n_chunks, ppl, eta);
    } else {
      std::printf("[%d]%.4f,", c + 1, ppl);
    }
    std::fflush(stdout);
  }
  std::printf(tty ? "\r\033[K" : "\n");
  const Estimate ppl = perplexity_of(nll);
  std::printf("Final estimate: PPL = %.4f +/- %.5f\n", ppl.value, ppl.uncertainty);
  if (base) print_kl_block(kl, a.base);
  std::fflush(stdout);
  return 0;
}

std::function<int()> setup(CLI::App& sub) {
  auto a = std::make_shared<PerplexityArgs>();
  sub.add_option("-m,--model", a->model, kModelHelp)->check(model_path());
  sub.add_option("-f,--file", a->text_file, "text file to score (UTF-8; one final newline is dropped)")->required();
  a->ctx_opt = sub.add_option("-c,--ctx-size", a->n_ctx,
                              "tokens per chunk (default 512, lowered to the model's training context)")
                   ->check(range(4, std::numeric_limits<int32_t>::max()));
  sub.add_option("-b,--batch-size", a->n_batch, "tokens per forward pass within a chunk (at most -c)")
      ->capture_default_str()
      ->check(range(1, std::numeric_limits<int32_t>::max()));
  sub.add_option("-t,--threads", a->n_threads, "kernel threads; 0 = all cores")->capture_default_str()->check(range(0, 4096));
  sub.add_option("--chunks", a->n_chunks, "chunks to evaluate, at most (default: all the text holds)")
      ->check(range(1, std::numeric_limits<int32_t>::max()));
  sub.add_option("--kl-divergence-base", a->base,
                 "base GGUF model (same tokenizer): also report the KL divergence from it, top-1 agreement, "
                 "RMS Δp and RMS Δlogit")
      ->check(model_path());
  return [a] { return run(*a); };
}

const CommandRegistrar reg{{"perplexity", "perplexity of a model over a text (llama-perplexity's method), "
                                          "KL divergence from a base model",
                            setup}};

}  // namespace
}  // namespace nexus::cli
