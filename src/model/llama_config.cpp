#include "model/llama_config.h"

#include <cmath>
#include <filesystem>

#include "gguf/gguf_file.h"
#include "util/error.h"

namespace nexus {
namespace {

int32_t require_int(const GgufFile& gguf, const std::string& key) {
  auto v = gguf.get_int(key);
  if (!v) throw Error(gguf.path() + ": missing metadata key " + key);
  if (*v <= 0 || *v > (int64_t{1} << 30)) throw Error(gguf.path() + ": " + key + " out of range: " + std::to_string(*v));
  return static_cast<int32_t>(*v);
}

int32_t optional_int(const GgufFile& gguf, const std::string& key, int32_t fallback) {
  return gguf.get_int(key) ? require_int(gguf, key) : fallback;
}

}  // namespace

LlamaConfig LlamaConfig::from_gguf(const GgufFile& gguf) {
  LlamaConfig c;
  c.arch = gguf.get_string("general.architecture").value_or("");
  c.traits = find_arch(c.arch);
  if (!c.traits)
    throw Error(gguf.path() + ": unsupported architecture '" + c.arch + "' (supported: " + supported_arch_names() + ")");
  const ArchTraits& t = *c.traits;
  c.name = gguf.get_string("general.name").value_or(std::filesystem::path(gguf.path()).stem().string());
  const std::string a = c.arch + ".";
  c.n_ctx_train = require_int(gguf, a + "context_length");
  c.n_embd = require_int(gguf, a + "embedding_length");
  c.n_layer = require_int(gguf, a + "block_count");
  c.n_ff = require_int(gguf, a + "feed_forward_length");
  c.n_head = require_int(gguf, a + "attention.head_count");
  c.n_head_kv = optional_int(gguf, a + "attention.head_count_kv", c.n_head);
  if (c.n_head % c.n_head_kv != 0) throw Error(gguf.path() + ": head_count is not a multiple of head_count_kv");
  if (!gguf.get_int(a + "attention.key_length") && c.n_embd % c.n_head != 0)
    throw Error(gguf.path() + ": embedding_length is not a multiple of head_count (and no attention.key_length)");
  c.head_dim = optional_int(gguf, a + "attention.key_length", c.n_embd / c.n_head);
  c.head_dim_v = optional_int(gguf, a + "attention.value_length", c.head_dim);
  if (c.head_dim_v != c.head_dim)
    throw Error(gguf.path() + ": attention.value_length " + std::to_string(c.head_dim_v) +
                " differs from key_length " + std::to_string(c.head_dim) + ", which Nexus does not implement");
  c.n_rot = optional_int(gguf, a + "rope.dimension_count", c.head_dim);
  if (c.n_rot > c.head_dim || c.n_rot % 2 != 0) throw Error(gguf.path() + ": invalid rope.dimension_count");
  const char* eps_key = t.norm == NormType::Rms ? "attention.layer_norm_rms_epsilon" : "attention.layer_norm_epsilon";
  c.rms_eps = static_cast<float>(gguf.get_float(a + eps_key).value_or(1e-5));
  c.rope_freq_base = static_cast<float>(gguf.get_float(a + "rope.freq_base").value_or(10000.0));
  c.rope_freq_base_swa = t.rope_base_swa > 0 ? t.rope_base_swa : c.rope_freq_base;
  if (!(c.rms_eps > 0) || !(c.rope_freq_base > 0)) throw Error(gguf.path() + ": invalid norm epsilon or rope base");

  // RoPE scaling: linear is a position scale; any other type is refused by
  // name rather than run as if it were absent.
  const std::string scaling = gguf.get_string(a + "rope.scaling.type").value_or("none");
  if (scaling == "linear") {
    const double factor = gguf.get_float(a + "rope.scaling.factor").value_or(1.0);
    if (!(factor >= 1.0) || !std::isfinite(factor))
      throw Error(gguf.path() + ": invalid rope.scaling.factor " + std::to_string(factor));
    c.rope_freq_scale = static_cast<float>(1.0 / factor);
  } else if (scaling != "none") {
    throw Error(gguf.path() + ": RoPE scaling type '" + scaling +
                "' is not implemented (supported: none, linear)");
  }

  if (gguf.get_int(a + "attention.sliding_window")) c.n_swa = require_int(gguf, a + "attention.sliding_window");
  if (t.softcaps) {
    c.attn_softcap = static_cast<float>(gguf.get_float(a + "attn_logit_softcapping").value_or(0.0));
    c.final_softcap = static_cast<float>(gguf.get_float(a + "final_logit_softcapping").value_or(0.0));
    if (!(c.attn_softcap >= 0) || !(c.final_softcap >= 0)) throw Error(gguf.path() + ": negative logit soft-cap");
  }
  // gemma's query_pre_attn_scalar is not stored: llama.cpp scales by
  // 1/sqrt(head_dim), except for the 27B models (n_embd / n_head).
  const bool gemma_27b = (c.arch == "gemma2" && c.n_layer == 46) || (c.arch == "gemma3" && c.n_layer == 62);
  c.attn_scale = 1.0f / std::sqrt(static_cast<float>(gemma_27b ? c.n_embd / c.n_head : c.head_dim));
  if (t.embd_scale) c.embd_scale = std::sqrt(static_cast<float>(c.n_embd));
  return c;
}

}  // namespace nexus
