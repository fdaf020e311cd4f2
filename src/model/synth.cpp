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
#include "model/arch.h"
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

// One tensor of the model: its name, [rows, cols] and what fills it.
struct Entry {
  std::string name;
  int64_t n_rows, n_cols;
  float std;       // > 0: random matrix ~ N(0, std^2)
  float constant;  // std == 0: every value (1 for a norm weight, 0 for a bias)
};

// The tensors of family s.arch, from arch.cpp's table: every Required one;
// of the Optional ones output.weight (unless tied) and attn_qkv (phi3 files
// carry the fused one; its separate Q/K/V alternative is then left out).
std::vector<Entry> tensor_list(const SynthShape& s) {
  const ArchTraits* arch = find_arch(s.arch);
  if (!arch) throw Error(fmt::format("synth: unknown architecture '{}' (known: {})", s.arch, supported_arch_names()));
  const int64_t D = s.head_size();
  const TensorDims dims{s.n_embd, s.n_head * D, s.n_head_kv * D, s.n_ff, D, s.n_vocab, D};
  std::vector<Entry> list;
  auto add = [&](std::string name, TensorShape sh) {
    const bool bias = name.size() >= 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
    if (sh.rows > 1) list.push_back({std::move(name), sh.rows, sh.cols, 1.0f / std::sqrt(static_cast<float>(sh.cols)), 0});
    else list.push_back({std::move(name), 1, sh.cols, 0.0f, bias ? 0.0f : 1.0f});
  };
  for (const TensorUse<ModelTensor>& u : model_tensors(*arch))
    if (u.need == Need::Required || (u.role == ModelTensor::Output && !s.tied))
      add(tensor_name(u.role), tensor_shape(u.role, dims));
  for (int32_t l = 0; l < s.n_layer; ++l) {
    const std::string b = fmt::format("blk.{}.", l);
    for (const TensorUse<LayerTensor>& u : layer_tensors(*arch))
      if (u.need == Need::Required || u.role == LayerTensor::Wqkv)
        add(b + tensor_name(u.role), tensor_shape(u.role, dims));
  }
  return list;
}

// What to write into one tensor.
struct Plan {
  Entry e;
  GgmlType type;
};

std::vector<Plan> plan_tensors(const SynthShape& s, GgmlType type, int32_t* n_fallback) {
  std::vector<Plan> p;
  for (Entry& e : tensor_list(s)) {
    GgmlType t = GgmlType::F32;  // norms and biases
    if (e.std > 0) {
      t = type;
      if (e.n_cols % ggml_type_traits(static_cast<uint32_t>(t))->block_size != 0) {
        t = GgmlType::F16;
        ++*n_fallback;
      }
    }
    p.push_back({std::move(e), t});
  }
  return p;
}

// Fills one tensor's bytes: each row from its own generator seeded by
// (seed, tensor, row), so the bytes do not depend on how rows are split.
void fill_tensor(const Plan& plan, size_t index, uint64_t seed, std::span<uint8_t> dst, ThreadPool& pool) {
  const Entry& t = plan.e;
  const size_t row_bytes = ggml_row_size(plan.type, static_cast<uint64_t>(t.n_cols));
  pool.parallel_for(t.n_rows, [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(t.n_cols));
    for (int64_t r = begin; r < end; ++r) {
      if (t.std == 0.0f) {
        std::fill(row.begin(), row.end(), t.constant);
      } else {
        uint64_t s = seed ^ (0x51ed2701f3a5c7b9ULL * (index + 1));
        s = splitmix64(s) + static_cast<uint64_t>(r);
        Xoshiro256 rng(s);
        fill_normal(rng, row.data(), t.n_cols, t.std);
      }
      quantize_row_ref(plan.type, row.data(), dst.data() + static_cast<size_t>(r) * row_bytes, t.n_cols);
    }
  });
}

}  // namespace

const std::vector<std::string>& synth_preset_names() {
  static const std::vector<std::string> names = {"tinyllama-1.1b", "llama-3.2-1b", "qwen2.5-0.5b", "stories260k-shape",
                                                 "qwen2.5-1.5b",   "qwen3-1.7b",   "phi3-mini",    "gemma2-2b",
                                                 "gemma3-1b",      "starcoder2-3b"};
  return names;
}

const std::vector<std::string>& synth_arch_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    const std::string all = supported_arch_names();  // "llama, mistral, ..."
    for (size_t b = 0; b < all.size();) {
      size_t e = all.find(", ", b);
      if (e == std::string::npos) e = all.size();
      v.push_back(all.substr(b, e - b));
      b = e + 2;
    }
    return v;
  }();
  return names;
}

void synth_set_arch(SynthShape& s, std::string_view arch) {
  if (!find_arch(arch))
    throw Error(fmt::format("synth: unknown architecture '{}' (known: {})", arch, supported_arch_names()));
  if (s.arch != arch) s.n_swa = 0, s.attn_softcap = s.final_softcap = 0.0f;
  s.arch = std::string(arch);
  if (arch == "gemma2") {
    if (s.attn_softcap == 0) s.attn_softcap = 50.0f;
    if (s.final_softcap == 0) s.final_softcap = 30.0f;
    if (s.n_swa == 0) s.n_swa = 4096;
  } else if (arch == "gemma3") {
    if (s.n_swa == 0) s.n_swa = 512;
  }
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
  } else if (name == "qwen2.5-1.5b") {  // Qwen2.5-1.5B: Q/K/V biases, tied
    s.n_embd = 1536, s.n_layer = 28, s.n_head = 12, s.n_head_kv = 2, s.n_ff = 8960, s.n_vocab = 151936;
    s.tied = true, s.rms_eps = 1e-6f, s.rope_freq_base = 1000000.0f;
    synth_set_arch(s, "qwen2");
  } else if (name == "qwen3-1.7b") {  // Qwen3-1.7B: QK-norm, head 128, tied
    s.n_embd = 2048, s.n_layer = 28, s.n_head = 16, s.n_head_kv = 8, s.head_dim = 128, s.n_ff = 6144;
    s.n_vocab = 151936, s.tied = true, s.rms_eps = 1e-6f, s.rope_freq_base = 1000000.0f;
    synth_set_arch(s, "qwen3");
  } else if (name == "phi3-mini") {  // Phi-3-mini-4k (3.8B): fused attn_qkv and gate+up
    s.n_embd = 3072, s.n_layer = 32, s.n_head = 32, s.n_head_kv = 32, s.n_ff = 8192, s.n_vocab = 32064;
    synth_set_arch(s, "phi3");
  } else if (name == "gemma2-2b") {  // Gemma 2 2B: head 256, post-norms, soft-caps, window 4096
    s.n_embd = 2304, s.n_layer = 26, s.n_head = 8, s.n_head_kv = 4, s.head_dim = 256, s.n_ff = 9216;
    s.n_vocab = 256000, s.tied = true, s.rms_eps = 1e-6f;
    synth_set_arch(s, "gemma2");
  } else if (name == "gemma3-1b") {  // Gemma 3 1B: head 256, QK-norm, window 512
    s.n_embd = 1152, s.n_layer = 26, s.n_head = 4, s.n_head_kv = 1, s.head_dim = 256, s.n_ff = 6912;
    s.n_vocab = 262144, s.tied = true, s.rms_eps = 1e-6f, s.rope_freq_base = 1000000.0f;
    synth_set_arch(s, "gemma3");
  } else if (name == "starcoder2-3b") {  // StarCoder2-3B: LayerNorm with biases, GELU MLP, tied
    s.n_embd = 3072, s.n_layer = 30, s.n_head = 24, s.n_head_kv = 2, s.n_ff = 12288, s.n_vocab = 49152;
    s.tied = true, s.rope_freq_base = 999999.4f;
    synth_set_arch(s, "starcoder2");
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
  if (!find_arch(s.arch))
    throw Error(fmt::format("synth: unknown architecture '{}' (known: {})", s.arch, supported_arch_names()));
  if (s.head_dim < 0 || s.head_dim > (1 << 16)) throw Error(fmt::format("synth: head_dim = {} is out of range", s.head_dim));
  if (s.n_swa < 0) throw Error("synth: the sliding window must not be negative");
  if (!(s.attn_softcap >= 0) || !(s.final_softcap >= 0)) throw Error("synth: soft-caps must not be negative");
  if (s.head_dim == 0 && s.n_embd % s.n_head != 0)
    throw Error(fmt::format("synth: n_embd {} is not a multiple of n_head {}", s.n_embd, s.n_head));
  if (s.n_head % s.n_head_kv != 0)
    throw Error(fmt::format("synth: n_head {} is not a multiple of n_head_kv {}", s.n_head, s.n_head_kv));
  if (s.head_size() % 2 != 0) throw Error("synth: head dimension must be even (RoPE rotates pairs)");
  if (!(s.rms_eps > 0) || !(s.rope_freq_base > 0)) throw Error("synth: rms_eps and rope_freq_base must be positive");
}

uint64_t synth_param_count(const SynthShape& s) {
  uint64_t n = 0;
  for (const Entry& e : tensor_list(s)) n += static_cast<uint64_t>(e.n_rows) * static_cast<uint64_t>(e.n_cols);
  return n;
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
  const ArchTraits& arch = *find_arch(s.arch);  // checked by synth_validate
  const std::string a = s.arch + ".";
  w.set_string("general.architecture", s.arch);
  w.set_string("general.name", opt.name.empty() ? fmt::format("synth {}x{} {}", s.n_embd, s.n_layer, type_name)
                                                : opt.name);
  w.set_string("general.description", "synthetic random weights (nexus synth): a benchmark shape, not a trained model");
  w.set_u32("general.file_type", file_type);
  w.set_u32("general.quantization_version", 2);
  w.set_u64("nexus.synth.seed", opt.seed);
  w.set_u32(a + "vocab_size", static_cast<uint32_t>(s.n_vocab));
  w.set_u32(a + "context_length", static_cast<uint32_t>(s.n_ctx));
  w.set_u32(a + "embedding_length", static_cast<uint32_t>(s.n_embd));
  w.set_u32(a + "block_count", static_cast<uint32_t>(s.n_layer));
  w.set_u32(a + "feed_forward_length", static_cast<uint32_t>(s.n_ff));
  w.set_u32(a + "rope.dimension_count", static_cast<uint32_t>(s.head_size()));
  w.set_u32(a + "attention.head_count", static_cast<uint32_t>(s.n_head));
  w.set_u32(a + "attention.head_count_kv", static_cast<uint32_t>(s.n_head_kv));
  if (s.head_dim > 0 || s.arch == "qwen3") {  // qwen3 files always carry it
    w.set_u32(a + "attention.key_length", static_cast<uint32_t>(s.head_size()));
    w.set_u32(a + "attention.value_length", static_cast<uint32_t>(s.head_size()));
  }
  w.set_f32(a + (arch.norm == NormType::Rms ? "attention.layer_norm_rms_epsilon" : "attention.layer_norm_epsilon"),
            s.rms_eps);
  w.set_f32(a + "rope.freq_base", s.rope_freq_base);
  if (s.n_swa > 0) w.set_u32(a + "attention.sliding_window", static_cast<uint32_t>(s.n_swa));
  if (arch.softcaps == SoftCaps::AttnAndFinal) {
    if (s.attn_softcap > 0) w.set_f32(a + "attn_logit_softcapping", s.attn_softcap);
    if (s.final_softcap > 0) w.set_f32(a + "final_logit_softcapping", s.final_softcap);
  }
  for (auto& [key, value] : tokenizer_kv) w.set(key, value);

  const std::vector<Plan> plan = plan_tensors(s, opt.type, &res.n_fallback_f16);
  for (const Plan& t : plan) {
    std::vector<uint64_t> ne = {static_cast<uint64_t>(t.e.n_cols)};
    if (t.e.std != 0.0f) ne.push_back(static_cast<uint64_t>(t.e.n_rows));
    w.add_tensor(t.e.name, t.type, std::move(ne));
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
