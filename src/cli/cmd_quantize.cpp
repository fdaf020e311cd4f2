// `nexus quantize IN.gguf OUT.gguf TYPE`: converts a model's matrices to a
// quantization mix (model/quant_mix.h) the way llama-quantize does without
// an importance matrix, and writes the result atomically.
//
//   nexus quantize IN OUT TYPE [--allow-requantize] [--output-type T]
//                  [--token-embedding-type T] [-t THREADS]
//
// stdout: a progress bar on a terminal, otherwise one line per tensor (name,
// old type -> new type, shape, size); then the totals. stderr: notes
// (fallback types) and warnings (requantizing) before the work starts.
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <map>
#include <vector>
#include <memory>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/usage_error.h"
#include "gguf/gguf_file.h"
#include "model/quantize_model.h"
#include "util/error.h"

namespace nexus::cli {
namespace {

// Ctrl-C / SIGTERM: stop at the next tensor and let the writer remove its
// temporary file, rather than die with a partial OUT.tmp on disk.
volatile std::sig_atomic_t g_stop = 0;
extern "C" void on_stop_signal(int) { g_stop = 1; }

struct QuantizeArgs {
  std::string in, out, type, output_type, token_embd_type;
  bool allow_requantize = false;
  int32_t threads = 0;
};

std::string mib(uint64_t bytes) { return fmt::format("{:.2f} MiB", bytes / 1048576.0); }

std::string shape_of(const TensorInfo& t) {
  std::string s = "[";
  for (size_t i = 0; i < t.ne.size(); ++i) s += (i ? ", " : "") + std::to_string(t.ne[i]);
  return s + "]";
}

std::string writable_type_names() {
  std::string s;
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1,
                     GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K,
                     GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS})
    s += (s.empty() ? "" : ", ") + std::string(ggml_type_name(t));
  return s;
}

CLI::Validator mix_name() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        return find_quant_mix(s) ? "" : "unknown type '" + s + "' (valid: " + quant_mix_names() + ")";
      },
      "TYPE");
}

CLI::Validator tensor_type_name() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        return parse_writable_type(s) ? "" : "unknown tensor type '" + s + "' (valid: " + writable_type_names() + ")";
      },
      "T");
}

// One line per tensor, or on a terminal one bar redrawn in place.
class ProgressView {
 public:
  ProgressView(const QuantizePlan& plan) : plan_(plan), tty_(isatty(fileno(stdout)) != 0) {
    for (const TensorPlan& p : plan.tensors) total_ += p.n_bytes;
  }
  void update(size_t i, bool done) {
    const TensorPlan& p = plan_.tensors[i];
    if (done) written_ += p.n_bytes;
    if (tty_) {
      const int width = 30, filled = total_ ? static_cast<int>(width * written_ / total_) : width;
      std::printf("\r[%s%s] %3d%% %zu/%zu %-40.40s", std::string(static_cast<size_t>(filled), '#').c_str(),
                  std::string(static_cast<size_t>(width - filled), '.').c_str(),
                  total_ ? static_cast<int>(100 * written_ / total_) : 100, i + done, plan_.tensors.size(),
                  p.src->name.c_str());
      std::fflush(stdout);
    } else if (done) {
      std::printf("[%4zu/%zu] %-36s %-6s -> %-6s %-18s %10s -> %s%s\n", i + 1, plan_.tensors.size(),
                  p.src->name.c_str(), std::string(ggml_type_name(p.src->type)).c_str(),
                  std::string(ggml_type_name(p.type)).c_str(), shape_of(*p.src).c_str(), mib(p.src->n_bytes).c_str(),
                  mib(p.n_bytes).c_str(), p.convert ? "" : " (copied)");
      std::fflush(stdout);
    }
  }
  void finish() {
    if (tty_) std::printf("\r%*s\r", 80, "");
  }

 private:
  const QuantizePlan& plan_;
  bool tty_;
  uint64_t total_ = 0, written_ = 0;
};

void check_output_folder(const std::string& out) {
  namespace fs = std::filesystem;
  fs::path dir = fs::path(out).parent_path();
  if (dir.empty()) dir = ".";
  if (!fs::is_directory(dir)) throw Error(fmt::format("cannot write {}: folder {} does not exist", out, dir.string()));
  if (access(dir.c_str(), W_OK) != 0)
    throw Error(fmt::format("cannot write {}: folder {} is not writable", out, dir.string()));
  if (fs::is_directory(out)) throw Error(fmt::format("cannot write {}: it is a folder", out));
}

int run_quantize(const QuantizeArgs& a) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  if (!std::filesystem::exists(a.in)) throw Error("input model file not found: " + a.in);
  check_output_folder(a.out);
  // Writing the output renames a temporary file over OUT: with OUT the input
  // itself, the only full-precision copy would be gone.
  std::error_code same_ec;
  if (std::filesystem::equivalent(a.in, a.out, same_ec))
    throw UsageError("output: " + a.out + " is the input file; write the quantized model to another path");
  const GgufFile in(a.in);
  QuantizeOptions opt;
  opt.mix = find_quant_mix(a.type);
  if (!a.output_type.empty()) opt.output_type = parse_writable_type(a.output_type);
  if (!a.token_embd_type.empty()) opt.token_embd_type = parse_writable_type(a.token_embd_type);
  opt.allow_requantize = a.allow_requantize;
  opt.n_threads = a.threads;

  const QuantizePlan plan = plan_quantization(in, opt);
  // One note per kind of fallback, naming the first few tensors.
  std::map<std::string, std::vector<std::string>> fallbacks;
  for (const TensorPlan& p : plan.tensors)
    if (!p.fallback.empty()) fallbacks[p.fallback].push_back(p.src->name);
  for (const auto& [why, names] : fallbacks) {
    std::string list;
    for (size_t i = 0; i < names.size() && i < 3; ++i) list += (i ? ", " : "") + names[i];
    std::fprintf(stderr, "quantize: note: %s, for %zu tensor%s (%s%s)\n", why.c_str(), names.size(),
                 names.size() == 1 ? "" : "s", list.c_str(), names.size() > 3 ? ", ..." : "");
  }
  if (!plan.requantized.empty())
    std::fprintf(stderr,
                 "quantize: warning: requantizing %zu tensors that are already quantized (%s is %s): each is "
                 "dequantized and rounded again, so the file is worse than one quantized from the original\n",
                 plan.requantized.size(), plan.requantized.front().c_str(),
                 std::string(ggml_type_name(in.find_tensor(plan.requantized.front())->type)).c_str());

  ProgressView view(plan);
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  QuantizeTotals totals;
  try {
    totals = write_quantized(in, plan, opt, a.out, [&](size_t i, bool done) {
      if (g_stop) throw Error("interrupted: nothing was written to " + a.out);
      view.update(i, done);
    });
  } catch (...) {
    view.finish();  // the error message starts on a clean line
    throw;
  }
  view.finish();
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  uint64_t n_params = 0;
  for (const TensorInfo& t : in.tensors()) n_params += t.n_elements();
  std::printf("quantized %s (%s) to %s (%s, %s) in %.2f s\n", a.in.c_str(), mib(in.file_size()).c_str(),
              a.out.c_str(), mib(totals.file_out).c_str(), std::string(opt.mix->name).c_str(), secs);
  std::printf("tensor data %s -> %s (%.2f bits per weight); %d tensors converted, %d copied\n",
              mib(totals.data_in).c_str(), mib(totals.data_out).c_str(),
              n_params ? 8.0 * static_cast<double>(totals.data_out) / static_cast<double>(n_params) : 0.0,
              totals.n_converted, totals.n_copied);
  return 0;
}

std::function<int()> setup(CLI::App& sub) {
  auto a = std::make_shared<QuantizeArgs>();
  sub.add_option("input", a->in, "GGUF model to quantize (F32, F16 or BF16 weights)")->required()->check(model_path());
  sub.add_option("output", a->out, "GGUF file to write (replaced atomically)")->required();
  sub.add_option("type", a->type, "target: " + quant_mix_names() + " (case-insensitive)")
      ->required()
      ->check(mix_name());
  sub.add_flag("--allow-requantize", a->allow_requantize,
               "convert tensors that are already quantized (dequantize, then quantize again: quality is lost)");
  sub.add_option("--output-type", a->output_type, "type of output.weight (overrides the mix)")
      ->check(tensor_type_name());
  sub.add_option("--token-embedding-type", a->token_embd_type, "type of token_embd.weight (overrides the mix)")
      ->check(tensor_type_name());
  sub.add_option("-t,--threads", a->threads, "threads (0 = all cores)")->capture_default_str()->check(range(0, 4096));
  std::string types = "Types (docs/quantize.md has the rules):\n";
  for (const QuantMix& m : quant_mixes()) types += fmt::format("  {:<8}{}\n", m.name, m.description);
  sub.footer(types);
  return [a] { return run_quantize(*a); };
}

CommandRegistrar reg{{"quantize", "convert a GGUF model's weights to a quantization mix (llama-quantize's types)",
                      setup}};

}  // namespace
}  // namespace nexus::cli
