#include "model/llama_config.h"

#include <cmath>
#include <filesystem>
#include <optional>
#include <utility>

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


// The file's value of `key` when it is set to something other than `none`.
std::optional<double> set_float(const GgufFile& gguf, const std::string& key, double none) {
  auto v = gguf.get_float(key);
  if (v && *v != none) return v;
  return std::nullopt;
}

[[noreturn]] void refuse_key(const GgufFile& gguf, const std::string& key, const std::string& why) {
  throw Error(gguf.path() + ": metadata key " + key + " " + why);
}

// RoPE scaling as llama.cpp reads it (llama-model.cpp load_hparams: type
// default "linear", factor from rope.scaling.factor or the old
// rope.scale_linear, 0 = none; llama-context.cpp: YaRN's ext_factor 1 unless
// set, the attention factor with YaRN's mscale cancelled against ggml's, as
// after llama.cpp PR 17945, times rope.scaling.attn_factor for every type).
void read_rope_scaling(const GgufFile& gguf, const std::string& a, LlamaConfig& c) {
  const std::string type_key = a + "rope.scaling.type";
  const std::string type = gguf.get_string(type_key).value_or("linear");
  if (type == "none") c.rope_scaling = RopeScaling::None;
  else if (type == "linear") c.rope_scaling = RopeScaling::Linear;
  else if (type == "yarn") c.rope_scaling = RopeScaling::Yarn;
  else if (type == "longrope") c.rope_scaling = RopeScaling::LongRope;
  else
    throw Error(gguf.path() + ": RoPE scaling type '" + type +
                "' is not implemented (supported: none, linear, yarn, longrope)");

  const std::string factor_key =
      gguf.find(a + "rope.scaling.factor") ? a + "rope.scaling.factor" : a + "rope.scale_linear";
  double factor = gguf.get_float(factor_key).value_or(0.0);
  if (factor == 0.0) factor = 1.0;
  if (!(factor >= 1.0) || !std::isfinite(factor))
    throw Error(gguf.path() + ": invalid " + factor_key + " " + std::to_string(factor) +
                " (Nexus implements factors >= 1)");
  if (c.rope_scaling == RopeScaling::None) factor = 1.0;  // llama.cpp: never scale with type none
  if (c.rope_scaling == RopeScaling::Linear && factor == 1.0) c.rope_scaling = RopeScaling::None;
  if (c.rope_scaling == RopeScaling::LongRope && factor != 1.0)
    refuse_key(gguf, factor_key, "with rope.scaling.type longrope is not implemented (LongRoPE scales by its factor tensors)");
  c.rope_freq_scale = static_cast<float>(1.0 / factor);

  c.n_ctx_orig = optional_int(gguf, a + "rope.scaling.original_context_length", c.n_ctx_train);
  const double attn = gguf.get_float(a + "rope.scaling.attn_factor").value_or(1.0);
  if (!(attn > 0) || !std::isfinite(attn)) refuse_key(gguf, a + "rope.scaling.attn_factor", "must be positive");

  // YaRN's own keys (llama.cpp reads them for some families, with these
  // meanings); without YaRN they would change nothing, so they are refused.
  const std::string yarn = a + "rope.scaling.yarn_";
  const bool is_yarn = c.rope_scaling == RopeScaling::Yarn;
  for (const char* k : {"ext_factor", "beta_fast", "beta_slow", "log_multiplier", "attn_factor"})
    if (gguf.find(yarn + k) && !is_yarn)
      refuse_key(gguf, yarn + k, "is set but rope.scaling.type is '" + type + "', not yarn");
  // yarn_attn_factor: llama.cpp replaces it by the YaRN mscale it computes.
  if (set_float(gguf, yarn + "attn_factor", 1.0))
    refuse_key(gguf, yarn + "attn_factor", "other than 1 is not implemented (llama.cpp overrides it under YaRN)");
  double kernel_attn = 1.0;
  if (is_yarn) {
    c.yarn_ext_factor = static_cast<float>(gguf.get_float(yarn + "ext_factor").value_or(1.0));
    c.yarn_beta_fast = static_cast<float>(gguf.get_float(yarn + "beta_fast").value_or(32.0));
    c.yarn_beta_slow = static_cast<float>(gguf.get_float(yarn + "beta_slow").value_or(1.0));
    const double log_mul = gguf.get_float(yarn + "log_multiplier").value_or(0.0);
    if (!(c.yarn_ext_factor >= 0 && c.yarn_ext_factor <= 1))
      refuse_key(gguf, yarn + "ext_factor", "must be in [0, 1]");
    if (!(c.yarn_beta_fast > 0) || !(c.yarn_beta_slow > 0) || !std::isfinite(log_mul))
      throw Error(gguf.path() + ": invalid YaRN beta_fast / beta_slow / log_multiplier");
    if (c.yarn_ext_factor != 0.0f) {
      auto mscale = [&](double m) { return factor <= 1.0 ? 1.0 : 0.1 * m * std::log(factor) + 1.0; };
      kernel_attn = (log_mul != 0.0 ? mscale(1.0) / mscale(log_mul) : mscale(1.0)) / (1.0 + 0.1 * std::log(factor));
    }
  }
  c.rope_attn_factor = static_cast<float>(kernel_attn * attn);
}

// Soft-caps by the family's reading (ArchTraits::softcaps); a cap the
// family does not apply is refused rather than dropped.
void read_softcaps(const GgufFile& gguf, const std::string& a, LlamaConfig& c) {
  const std::string attn_key = a + "attn_logit_softcapping", final_key = a + "final_logit_softcapping";
  const double attn = gguf.get_float(attn_key).value_or(0.0), fin = gguf.get_float(final_key).value_or(0.0);
  if (!(attn >= 0) || !(fin >= 0)) throw Error(gguf.path() + ": negative logit soft-cap");
  switch (c.traits->softcaps) {
    case SoftCaps::AttnAndFinal:
      c.attn_softcap = static_cast<float>(attn);
      c.final_softcap = static_cast<float>(fin);
      return;
    case SoftCaps::FinalWithoutWindow:
      if (fin > 0 && c.n_swa > 0)
        refuse_key(gguf, final_key,
                   "with a sliding window is not implemented (llama.cpp's " + c.arch +
                       " graph skips it there, the reference implementation applies it)");
      c.final_softcap = static_cast<float>(fin);
      break;
    case SoftCaps::None:
      if (fin > 0) refuse_key(gguf, final_key, "is not implemented for architecture " + c.arch);
      break;
  }
  if (attn > 0) refuse_key(gguf, attn_key, "is not implemented for architecture " + c.arch);
}

// Keys llama.cpp reads for some family that change the computation in ways
// no family here implements: refused when set to anything but their neutral value.
void refuse_unimplemented_keys(const GgufFile& gguf, const std::string& a) {
  const std::pair<const char*, double> keys[] = {
      {"expert_count", 0},     {"expert_used_count", 0}, {"logit_scale", 1},     {"embedding_scale", 1},
      {"residual_scale", 1},   {"attention.scale", 1},   {"attention.clamp_kqv", 0},
  };
  for (const auto& [k, neutral] : keys)
    if (set_float(gguf, a + k, neutral)) refuse_key(gguf, a + k, "is not implemented");
  if (gguf.get_bool(a + "attention.causal").value_or(true) == false)
    refuse_key(gguf, a + "attention.causal", "false (non-causal attention) is not implemented");
  for (const char* k : {"feed_forward_length", "attention.head_count", "attention.head_count_kv"})
    if (const GgufValue* v = gguf.find(a + k); v && !gguf.get_int(a + k))
      refuse_key(gguf, a + k, "is not a single integer (per-layer values are not implemented)");
}

}  // namespace

const char* rope_scaling_name(RopeScaling s) {
  switch (s) {
    case RopeScaling::None: return "none";
    case RopeScaling::Linear: return "linear";
    case RopeScaling::Yarn: return "yarn";
    case RopeScaling::LongRope: return "longrope";
  }
  return "?";
}

LlamaConfig LlamaConfig::from_gguf(const GgufFile& gguf) {
  LlamaConfig c;
  c.arch = gguf.get_string("general.architecture").value_or("");
  c.traits = find_arch(c.arch);
  if (!c.traits)
    throw Error(gguf.path() + ": unsupported architecture '" + c.arch + "' (supported: " + supported_arch_names() + ")");
  const ArchTraits& t = *c.traits;
  c.name = gguf.get_string("general.name").value_or(std::filesystem::path(gguf.path()).stem().string());
  const std::string a = c.arch + ".";
  refuse_unimplemented_keys(gguf, a);
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

  read_rope_scaling(gguf, a, c);
  // sliding_window 0 means none (llama.cpp; Phi-4 files carry it so).
  if (gguf.get_int(a + "attention.sliding_window").value_or(0) != 0)
    c.n_swa = require_int(gguf, a + "attention.sliding_window");
  read_softcaps(gguf, a, c);
  // gemma's query_pre_attn_scalar is not stored: llama.cpp scales by
  // 1/sqrt(head_dim), except for the 27B models (n_embd / n_head).
  const bool gemma_27b = (c.arch == "gemma2" && c.n_layer == 46) || (c.arch == "gemma3" && c.n_layer == 62);
  c.attn_scale = 1.0f / std::sqrt(static_cast<float>(gemma_27b ? c.n_embd / c.n_head : c.head_dim));
  if (t.embd_scale) c.embd_scale = std::sqrt(static_cast<float>(c.n_embd));
  c.pooling_type = optional_int(gguf, a + "pooling_type", -1);
  return c;
}

}  // namespace nexus
