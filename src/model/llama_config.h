// LlamaConfig: hyper-parameters of a GGUF model of any family Nexus runs
// (model/arch.h; the name is from when llama was the only one), read from
// its metadata the way llama.cpp reads them (GGUF spec "LLM" keys, all
// prefixed by general.architecture): context_length, embedding_length,
// block_count, feed_forward_length, attention.head_count, .head_count_kv,
// .key_length, .value_length, .layer_norm_rms_epsilon (or
// .layer_norm_epsilon for LayerNorm families), .sliding_window,
// rope.dimension_count, .freq_base, .scaling.type / .scaling.factor (or the
// old .scale_linear) / .scaling.attn_factor / .scaling.original_context_length
// / .scaling.yarn_ext_factor, _beta_fast, _beta_slow, _log_multiplier,
// attn_logit_softcapping, final_logit_softcapping. A key that would change
// what the model computes in a way Nexus does not implement (a RoPE scaling
// type, YaRN keys without YaRN, a soft-cap the family does not apply, experts,
// logit / embedding / residual scales) is refused by name.
#pragma once

#include <cstdint>
#include <string>

#include "model/arch.h"

namespace nexus {

class GgufFile;

enum class RopeScaling { None, Linear, Yarn, LongRope };
const char* rope_scaling_name(RopeScaling s);  // "none", "linear", "yarn", "longrope"

struct LlamaConfig {
  std::string arch;          // general.architecture ("llama", "qwen2", ...)
  std::string name;          // general.name, or the file's stem
  const ArchTraits* traits = nullptr;  // what the family computes (never null after from_gguf)
  int32_t n_vocab = 0;       // tokens
  int32_t n_ctx_train = 0;   // tokens the model was trained for
  int32_t n_embd = 0;        // hidden size (residual stream width)
  int32_t n_layer = 0;
  int32_t n_head = 0;        // query heads
  int32_t n_head_kv = 0;     // key/value heads (GQA: n_head % n_head_kv == 0)
  int32_t head_dim = 0;      // key (and query) size per head: attention.key_length, else n_embd / n_head
  int32_t head_dim_v = 0;    // value size per head: attention.value_length, else head_dim
  int32_t n_ff = 0;          // FFN hidden size
  int32_t n_rot = 0;         // RoPE dimensions per head (<= head_dim)
  float rms_eps = 1e-5f;     // the norm's epsilon (RMSNorm or LayerNorm)
  float rope_freq_base = 10000.0f;
  float rope_freq_base_swa = 10000.0f;  // windowed layers' base (= rope_freq_base unless the family says)
  // RoPE scaling (rope.scaling.type; llama.cpp's default "linear" with no
  // factor is none). Linear and YaRN scale positions by rope_freq_scale;
  // LongRoPE (phi3) divides each frequency by rope_factors_long/short.
  RopeScaling rope_scaling = RopeScaling::None;
  float rope_freq_scale = 1.0f;         // 1 / rope.scaling.factor
  // ggml_rope_ext's attn_factor as llama.cpp passes it (llama-context.cpp
  // cparams.yarn_attn_factor): rope.scaling.attn_factor, times YaRN's mscale
  // correction; RoPE's cos and sin are multiplied by it (family_ops.h).
  float rope_attn_factor = 1.0f;
  float yarn_ext_factor = 0.0f;         // YaRN extrapolation weight (1 under YaRN unless the file says)
  float yarn_beta_fast = 32.0f;         // YaRN correction range (llama.cpp's defaults)
  float yarn_beta_slow = 1.0f;
  int32_t n_ctx_orig = 0;               // rope.scaling.original_context_length, else n_ctx_train
  int32_t n_swa = 0;                    // sliding window (positions a query sees, itself included); 0 = none
  float attn_softcap = 0.0f;            // scores -> cap * tanh(scores / cap); 0 = none
  float final_softcap = 0.0f;           // the same on the logits
  float attn_scale = 0.0f;              // attention score scale (1/sqrt(head_dim) for every family here)
  float embd_scale = 1.0f;              // embeddings times this (sqrt(n_embd) for gemma)
  // <arch>.pooling_type as the file says (llama.cpp's enum: 0 none, 1 mean,
  // 2 cls, 3 last, 4 rank); -1 when absent. Only /v1/embeddings reads it.
  int32_t pooling_type = -1;

  int32_t n_embd_q() const { return n_head * head_dim; }      // query width
  int32_t n_embd_kv() const { return n_head_kv * head_dim; }  // key (= value) width per position
  // Whether layer l attends only to the last n_swa positions.
  bool is_swa(int32_t l) const {
    if (n_swa <= 0) return false;
    const int32_t p = traits->swa_period;
    return p == 0 || l % p < p - 1;
  }

  // Reads and validates the hyper-parameters; throws nexus::Error naming the
  // missing or inconsistent key, an unsupported architecture, or a RoPE
  // scaling type Nexus does not implement.
  static LlamaConfig from_gguf(const GgufFile& gguf);
};

}  // namespace nexus
