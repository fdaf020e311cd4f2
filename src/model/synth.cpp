#include "model/synth.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "kernels/thread_pool.h"
#include "model/quantize_ref.h"
#include "util/error.h"

namespace nexus {
namespace {

// SplitMix64 (Steele, Lea, Flood 2014): seeds the per-row generators.
uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// xoshiro256** (Blackman & Vigna 2018): fast, good-quality 64-bit stream.
class Xoshiro256 {
 public:
  explicit Xoshiro256(uint64_t seed) {
    for (uint64_t& w : s_) w = splitmix64(seed);
  }
  uint64_t next() {
    const uint64_t result = std::rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = std::rotl(s_[3], 45);
    return result;
  }

 private:
  uint64_t s_[4];
};

// n values ~ N(0, std^2), approximated by the sum of four 16-bit uniforms of
// one 64-bit draw (Irwin-Hall, n = 4): mean 4 * 32767.5, std 65536 / sqrt(3).
void fill_normal(Xoshiro256& rng, float* out, int64_t n, float std) {
  const float scale = std * 1.7320508f / 65536.0f;
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t r = rng.next();
    const uint32_t sum = static_cast<uint32_t>(r & 0xffff) + static_cast<uint32_t>((r >> 16) & 0xffff) +
                         static_cast<uint32_t>((r >> 32) & 0xffff) + static_cast<uint32_t>(r >> 48);
    out[i] = (static_cast<float>(sum) - 131070.0f) * scale;
  }
}

// llama_ftype values of llama.cpp ("mostly <type>"), for general.file_type.
uint32_t file_type_of(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return 0;
    case GgmlType::F16: return 1;
    case GgmlType::Q4_0: return 2;
    case GgmlType::Q8_0: return 7;
    case GgmlType::BF16: return 32;
    default: throw Error("synth: unsupported weight type " + std::string(ggml_type_name(t)));
  }
}

// What to write into one tensor.
struct Plan {
  std::string name;
  GgmlType type;
  int64_t n_rows, n_cols;
  float std;  // 0 = all ones (a norm weight)
};

std::vector<Plan> plan_tensors(const SynthShape& s, GgmlType type, int32_t* n_fallback) {
  std::vector<Plan> p;
  const int64_t E = s.n_embd, KV = static_cast<int64_t>(s.n_embd / s.n_head) * s.n_head_kv, F = s.n_ff;
  auto matrix = [&](std::string name, int64_t rows, int64_t cols) {
    GgmlType t = type;
    if (cols % ggml_type_traits(static_cast<uint32_t>(t))->block_size != 0) {
      t = GgmlType::F16;
      ++*n_fallback;
    }
    p.push_back({std::move(name), t, rows, cols, 1.0f / std::sqrt(static_cast<float>(cols))});
  };
  auto norm = [&](std::string name) { p.push_back({std::move(name), GgmlType::F32, 1, E, 0.0f}); };
  matrix("token_embd.weight", s.n_vocab, E);
  norm("output_norm.weight");
  if (!s.tied) matrix("output.weight", s.n_vocab, E);
  for (int32_t l = 0; l < s.n_layer; ++l) {
    const std::string b = fmt::format("blk.{}.", l);
    norm(b + "attn_norm.weight");
    matrix(b + "attn_q.weight", E, E);
    matrix(b + "attn_k.weight", KV, E);
    matrix(b + "attn_v.weight", KV, E);
    matrix(b + "attn_output.weight", E, E);
    norm(b + "ffn_norm.weight");
    matrix(b + "ffn_gate.weight", F, E);
    matrix(b + "ffn_up.weight", F, E);
    matrix(b + "ffn_down.weight", E, F);
  }
  return p;
}

// Fills one tensor's bytes: each row from its own generator seeded by
// (seed, tensor, row), so the bytes do not depend on how rows are split.
void fill_tensor(const Plan& t, size_t index, uint64_t seed, std::span<uint8_t> dst, ThreadPool& pool) {
  const size_t row_bytes = ggml_row_size(t.type, static_cast<uint64_t>(t.n_cols));
  pool.parallel_for(t.n_rows, [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(t.n_cols));
    for (int64_t r = begin; r < end; ++r) {
      if (t.std == 0.0f) {
        std::fill(row.begin(), row.end(), 1.0f);
      } else {
        uint64_t s = seed ^ (0x51ed2701f3a5c7b9ULL * (index + 1));
        s = splitmix64(s) + static_cast<uint64_t>(r);
        Xoshiro256 rng(s);
        fill_normal(rng, row.data(), t.n_cols, t.std);
      }
      quantize_row_ref(t.type, row.data(), dst.data() + static_cast<size_t>(r) * row_bytes, t.n_cols);
    }
  });
}

}  // namespace

const std::vector<std::string>& synth_preset_names() {
  static const std::vector<std::string> names = {"tinyllama-1.1b", "llama-3.2-1b", "qwen2.5-0.5b", "stories260k-shape"};
  return names;
}

SynthShape synth_preset(std::string_view name) {
  SynthShape s;
  s.n_ctx = 2048;
  if (name == "tinyllama-1.1b") {  // TinyLlama-1.1B: llama 2 shape, GQA 32/4
    s.n_embd = 2048, s.n_layer = 22, s.n_head = 32, s.n_head_kv = 4, s.n_ff = 5632, s.n_vocab = 32000;
  } else if (name == "llama-3.2-1b") {  // Llama 3.2 1B's shape, tied embeddings
    s.n_embd = 2048, s.n_layer = 16, s.n_head = 32, s.n_head_kv = 8, s.n_ff = 8192, s.n_vocab = 32000;
    s.tied = true;
  } else if (name == "qwen2.5-0.5b") {  // Qwen2.5-0.5B's shape (head_dim 64), tied embeddings
    s.n_embd = 896, s.n_layer = 24, s.n_head = 14, s.n_head_kv = 2, s.n_ff = 4864, s.n_vocab = 32000;
    s.tied = true;
    s.rms_eps = 1e-6f;
  } else if (name == "stories260k-shape") {  // Karpathy's stories260K
    s.n_embd = 64, s.n_layer = 5, s.n_head = 8, s.n_head_kv = 4, s.n_ff = 172, s.n_vocab = 512;
  } else {
    std::string known;
    for (const std::string& n : synth_preset_names()) known += (known.empty() ? "" : ", ") + n;
    throw Error(fmt::format("synth: unknown preset '{}' (known: {})", name, known));
  }
  return s;
}

void synth_validate(const SynthShape& s) {
  auto positive = [](const char* what, int64_t v) {
    if (v <= 0 || v > (int64_t{1} << 24)) throw Error(fmt::format("synth: {} = {} is out of range", what, v));
  };
  positive("n_embd", s.n_embd);
  positive("n_layer", s.n_layer);
  positive("n_head", s.n_head);
  positive("n_head_kv", s.n_head_kv);
  positive("n_ff", s.n_ff);
  positive("n_vocab", s.n_vocab);
  positive("n_ctx", s.n_ctx);
  if (s.n_embd % s.n_head != 0)
    throw Error(fmt::format("synth: n_embd {} is not a multiple of n_head {}", s.n_embd, s.n_head));
  if (s.n_head % s.n_head_kv != 0)
    throw Error(fmt::format("synth: n_head {} is not a multiple of n_head_kv {}", s.n_head, s.n_head_kv));
  if ((s.n_embd / s.n_head) % 2 != 0) throw Error("synth: head dimension must be even (RoPE rotates pairs)");
  if (!(s.rms_eps > 0) || !(s.rope_freq_base > 0)) throw Error("synth: rms_eps and rope_freq_base must be positive");
}

uint64_t synth_param_count(const SynthShape& s) {
  const uint64_t E = static_cast<uint64_t>(s.n_embd), F = static_cast<uint64_t>(s.n_ff);
  const uint64_t KV = E / static_cast<uint64_t>(s.n_head) * static_cast<uint64_t>(s.n_head_kv);
  const uint64_t V = static_cast<uint64_t>(s.n_vocab);
  const uint64_t per_layer = 2 * E * E + 2 * KV * E + 3 * E * F + 2 * E;
  return V * E * (s.tied ? 1 : 2) + E + per_layer * static_cast<uint64_t>(s.n_layer);
}

SynthResult synth_model(const SynthOptions& opt, const std::string& out_path) {
  SynthResult res;
  res.shape = opt.shape;
  SynthShape& s = res.shape;
  const uint32_t file_type = file_type_of(opt.type);

  GgufWriter w;
  std::vector<std::pair<std::string, GgufValue>> tokenizer_kv;
  if (!opt.vocab_path.empty()) {
    const GgufFile vocab(opt.vocab_path);
    const GgufArray* tokens = vocab.get_array("tokenizer.ggml.tokens");
    if (!tokens || tokens->elem_type != GgufValueType::STRING || tokens->size() == 0)
      throw Error(opt.vocab_path + ": no tokenizer.ggml.tokens string array: not a vocabulary file");
    s.n_vocab = static_cast<int32_t>(tokens->size());
    for (const auto& [key, value] : vocab.metadata())
      if (key.rfind("tokenizer.", 0) == 0) tokenizer_kv.emplace_back(key, value);
  }
  synth_validate(s);

  const std::string type_name(ggml_type_name(opt.type));
  w.set_string("general.architecture", "llama");
  w.set_string("general.name", opt.name.empty() ? fmt::format("synth {}x{} {}", s.n_embd, s.n_layer, type_name)
                                                : opt.name);
  w.set_string("general.description", "synthetic random weights (nexus synth): a benchmark shape, not a trained model");
  w.set_u32("general.file_type", file_type);
  w.set_u32("general.quantization_version", 2);
  w.set_u64("nexus.synth.seed", opt.seed);
  w.set_u32("llama.vocab_size", static_cast<uint32_t>(s.n_vocab));
  w.set_u32("llama.context_length", static_cast<uint32_t>(s.n_ctx));
  w.set_u32("llama.embedding_length", static_cast<uint32_t>(s.n_embd));
  w.set_u32("llama.block_count", static_cast<uint32_t>(s.n_layer));
  w.set_u32("llama.feed_forward_length", static_cast<uint32_t>(s.n_ff));
  w.set_u32("llama.rope.dimension_count", static_cast<uint32_t>(s.n_embd / s.n_head));
  w.set_u32("llama.attention.head_count", static_cast<uint32_t>(s.n_head));
  w.set_u32("llama.attention.head_count_kv", static_cast<uint32_t>(s.n_head_kv));
  w.set_f32("llama.attention.layer_norm_rms_epsilon", s.rms_eps);
  w.set_f32("llama.rope.freq_base", s.rope_freq_base);
  for (auto& [key, value] : tokenizer_kv) w.set(key, value);

  const std::vector<Plan> plan = plan_tensors(s, opt.type, &res.n_fallback_f16);
  for (const Plan& t : plan) {
    std::vector<uint64_t> ne = {static_cast<uint64_t>(t.n_cols)};
    if (t.std != 0.0f) ne.push_back(static_cast<uint64_t>(t.n_rows));
    w.add_tensor(t.name, t.type, std::move(ne));
  }
  res.n_params = synth_param_count(s);
  res.file_bytes = w.file_size();

  // Fail before the (long) write when the destination folder is missing.
  const std::filesystem::path dir = std::filesystem::path(out_path).parent_path();
  if (!dir.empty() && !std::filesystem::is_directory(dir))
    throw Error(out_path + ": folder " + dir.string() + " does not exist");
  ThreadPool pool(opt.n_threads);
  w.write(out_path, [&](size_t i, std::span<uint8_t> dst) { fill_tensor(plan[i], i, opt.seed, dst, pool); });
  return res;
}

}  // namespace nexus
