// `nexus synth`: writes a GGUF model of a chosen family (--arch) with random
// weights in a chosen shape (src/model/synth.h), for benchmarks.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/seed_arg.h"
#include "model/synth.h"
#include "util/error.h"

namespace nexus::cli {
namespace {

struct SynthArgs {
  std::string preset, arch, type = "F32", vocab_from, out, name;
  std::optional<int32_t> dim, layers, heads, kv_heads, head_dim, ffn, vocab, ctx;
  std::optional<bool> tied;
  std::string seed = "1";  // -1: random (printed)
  int32_t threads = 0;
};

// The weight types synth writes, by name in any case ("q4_0" is Q4_0).
std::optional<GgmlType> parse_type(const std::string& s) {
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0}) {
    const std::string_view name = ggml_type_name(t);
    if (std::equal(s.begin(), s.end(), name.begin(), name.end(),
                   [](char x, char y) { return std::toupper(static_cast<unsigned char>(x)) == y; }))
      return t;
  }
  return std::nullopt;
}

int run_synth(const SynthArgs& a) {
  SynthOptions opt;
  opt.type = *parse_type(a.type);  // checked by the option
  const std::string type_name(ggml_type_name(opt.type));
  if (!a.preset.empty()) {
    opt.shape = synth_preset(a.preset);
  } else {
    if (!a.dim || !a.layers || !a.heads || !a.ffn || (!a.vocab && a.vocab_from.empty()))
      throw UsageError("synth: without --preset, give --dim, --layers, --heads, --ffn and --vocab (or --vocab-from)");
    opt.shape.n_ctx = 2048;
  }
  SynthShape& s = opt.shape;
  if (!a.arch.empty()) synth_set_arch(s, a.arch);  // lower case: checked by the option
  if (a.dim) s.n_embd = *a.dim;
  if (a.layers) s.n_layer = *a.layers;
  if (a.heads) s.n_head = *a.heads;
  if (a.kv_heads) s.n_head_kv = *a.kv_heads;
  else if (a.preset.empty()) s.n_head_kv = s.n_head;
  if (a.head_dim) s.head_dim = *a.head_dim;
  if (a.ffn) s.n_ff = *a.ffn;
  if (a.vocab) s.n_vocab = *a.vocab;
  if (a.ctx) s.n_ctx = *a.ctx;
  if (a.tied) s.tied = *a.tied;
  // The shape comes from the command line alone, so a bad one is a usage
  // error (the size of a --vocab-from vocabulary is checked with the file).
  SynthShape given = s;
  if (!a.vocab_from.empty()) given.n_vocab = 1;
  try {
    synth_validate(given);
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  opt.vocab_path = a.vocab_from;
  opt.seed = resolve_seed(a.seed, "nexus synth");
  opt.n_threads = a.threads;
  opt.name = !a.name.empty() ? a.name
             : !a.preset.empty() ? fmt::format("synth {} {}", a.preset, type_name)
                                 : "";

  const auto t0 = std::chrono::steady_clock::now();
  const SynthResult r = synth_model(opt, a.out);
  if (a.vocab && !a.vocab_from.empty() && *a.vocab != r.shape.n_vocab)
    std::fprintf(stderr, "nexus synth: note: --vocab %d replaced by the %d tokens of %s\n", *a.vocab, r.shape.n_vocab,
                 a.vocab_from.c_str());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const SynthShape& w = r.shape;
  std::printf("wrote %s (%s): %.2f MiB, %.3f M params, %s, dim %d, layers %d, heads %d/%d of %d, ffn %d, vocab %d, ctx %d%s (%.1f s)\n",
              a.out.c_str(), w.arch.c_str(), r.file_bytes / 1048576.0, r.n_params / 1e6, type_name.c_str(), w.n_embd,
              w.n_layer, w.n_head, w.n_head_kv, w.head_size(), w.n_ff, w.n_vocab, w.n_ctx,
              w.tied ? ", tied embeddings" : "", secs);
  if (r.n_fallback_f16)
    std::printf("note: %d matrices have rows that are not a multiple of the %s block size: stored as F16\n",
                r.n_fallback_f16, type_name.c_str());
  return 0;
}

std::function<int()> setup(CLI::App& sub) {
  auto a = std::make_shared<SynthArgs>();
  std::string presets;
  for (const std::string& n : synth_preset_names()) presets += (presets.empty() ? "" : "|") + n;
  sub.add_option("--preset", a->preset, "model shape: " + presets)
      ->check(CLI::Validator(
          [presets](std::string& name) -> std::string {
            const auto& known = synth_preset_names();
            return std::find(known.begin(), known.end(), name) != known.end()
                       ? ""
                       : "unknown preset '" + name + "' (known: " + presets + ")";
          },
          ""));
  std::string archs;
  for (const std::string& n : synth_arch_names()) archs += (archs.empty() ? "" : "|") + n;
  sub.add_option("--arch", a->arch, "model family, any case: " + archs + " (default: the preset's, else llama)")
      ->transform(CLI::Validator(
          [archs](std::string& name) -> std::string {
            std::transform(name.begin(), name.end(), name.begin(),
                           [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
            const auto& known = synth_arch_names();
            return std::find(known.begin(), known.end(), name) != known.end()
                       ? ""
                       : "unknown architecture '" + name + "' (known: " + archs + ")";
          },
          ""));
  sub.add_option("--dim", a->dim, "hidden size (overrides the preset)");
  sub.add_option("--layers", a->layers, "number of layers");
  sub.add_option("--heads", a->heads, "query heads");
  sub.add_option("--kv-heads", a->kv_heads, "key/value heads (default: the preset's, or --heads)");
  sub.add_option("--head-dim", a->head_dim, "per-head size (default: the preset's, or dim / heads)");
  sub.add_option("--ffn", a->ffn, "FFN hidden size");
  sub.add_option("--vocab", a->vocab, "vocabulary size when there is no --vocab-from");
  sub.add_option("--ctx", a->ctx, "training context written to the metadata (default 2048)");
  sub.add_option("--tied", a->tied, "tie output and token embeddings (true/false; default: the preset's)");
  sub.add_option("--type", a->type, "matrix type: F32|F16|BF16|Q8_0|Q4_0, any case (norms stay F32)")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& t) -> std::string {
            return parse_type(t) ? ""
                                   : "unsupported type '" + t +
                                         "' (supported: F32, F16, BF16, Q8_0, Q4_0; for the other types synth "
                                         "F16, then nexus quantize)";
          },
          ""));
  sub.add_option("--vocab-from", a->vocab_from, "GGUF whose tokenizer.* keys are copied (sets the vocabulary size)")
      ->check(CLI::ExistingFile);
  sub.add_option("-o,--output", a->out, "output GGUF path")->required();
  add_seed_option(sub, a->seed, "seed of the weights; -1 = random (printed)");
  sub.add_option("--name", a->name, "general.name (default: 'synth PRESET TYPE')");
  sub.add_option("-t,--threads", a->threads, "threads (0 = all cores)")->capture_default_str()->check(range(0, 4096));
  return [a] { return run_synth(*a); };
}

CommandRegistrar reg{{"synth", "write a GGUF model of any family with random weights (for benchmarks)", setup}};

}  // namespace
}  // namespace nexus::cli
