#include "model/forward_steps.h"

#include <string>

#include "kernels/dequant.h"
#include "kernels/family_ops.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "model/cpu_ops.h"
#include "model/llama_model.h"
#include "util/error.h"

namespace nexus {

void Activations::resize(const LlamaConfig& c, size_t n) {
  for (auto* b : {&x, &xb, &xb2}) b->resize(n * c.n_embd);
  for (auto* b : {&q, &att}) b->resize(n * c.n_embd_q());
  for (auto* b : {&k, &v}) b->resize(n * c.n_embd_kv());
  for (auto* b : {&hb, &hb2}) b->resize(n * c.n_ff);
}

LayerBuffers Activations::rows_from(const LlamaConfig& c, int64_t t) {
  const int64_t E = c.n_embd, Q = c.n_embd_q(), KV = c.n_embd_kv(), F = c.n_ff;
  return {&x[t * E], &xb[t * E], &xb2[t * E], &q[t * Q], &k[t * KV], &v[t * KV], &att[t * Q], &hb[t * F], &hb2[t * F]};
}

void check_token_ids(const LlamaConfig& c, std::span<const int32_t> tokens, const char* what) {
  for (int32_t id : tokens)
    if (id < 0 || id >= c.n_vocab) throw Error(std::string(what) + ": token id " + std::to_string(id) + " out of range");
}

void embed_tokens(const LlamaModel& model, std::span<const int32_t> tokens, Activations& a) {
  const LlamaConfig& c = model.config();
  const int64_t E = c.n_embd;
  for (size_t t = 0; t < tokens.size(); ++t) {
    float* x = &a.x[t * E];
    dequantize_row(model.tok_embd().type, model.tok_embd().row(tokens[t]), x, E);
    if (c.embd_scale != 1.0f)
      for (int64_t i = 0; i < E; ++i) x[i] *= c.embd_scale;
  }
}

void output_norm(const LlamaModel& model, const float* x, float* out) {
  const LlamaConfig& c = model.config();
  if (c.traits->norm == NormType::Layer)
    layernorm(out, x, model.output_norm().f32(), model.output_norm_b().f32(), c.n_embd, c.rms_eps);
  else
    rmsnorm(out, x, model.output_norm().f32(), c.n_embd, c.rms_eps);
}

void output_logits(const LlamaModel& model, Activations& a, std::span<const int32_t> rows, std::vector<float>& logits,
                   ThreadPool& pool) {
  const LlamaConfig& c = model.config();
  const int64_t E = c.n_embd;
  const int64_t n_out = static_cast<int64_t>(rows.size());
  for (int64_t i = 0; i < n_out; ++i) output_norm(model, &a.x[rows[i] * E], &a.xb[i * E]);
  logits.resize(static_cast<size_t>(n_out) * c.n_vocab);
  if (n_out > 0) matmul(model.output(), a.xb.data(), logits.data(), n_out, pool);
  if (c.final_softcap > 0) softcap(logits.data(), static_cast<int64_t>(logits.size()), c.final_softcap);
}

void rope_tables(const LlamaConfig& c, const float* factors, const int32_t* pos, int64_t n, bool swa, float* cs) {
  RopeParams p;
  p.freq_base = swa ? c.rope_freq_base_swa : c.rope_freq_base;
  p.freq_scale = swa ? 1.0f : c.rope_freq_scale;  // windowed layers are not scaled (llama.cpp gemma3)
  p.ext_factor = c.yarn_ext_factor;
  p.attn_factor = c.rope_attn_factor;
  p.factors = factors;
  if (p.ext_factor != 0.0f)
    rope_yarn_corr_dims(c.n_rot, c.n_ctx_orig, p.freq_base, c.yarn_beta_fast, c.yarn_beta_slow, &p.corr_low,
                        &p.corr_high);
  const bool plain = !factors && p.freq_scale == 1.0f && p.ext_factor == 0.0f && p.attn_factor == 1.0f;
  for (int64_t t = 0; t < n; ++t) {
    if (plain) rope_angles(pos[t], c.n_rot, p.freq_base, &cs[t * c.n_rot]);
    else rope_angles_ext(pos[t], c.n_rot, p, &cs[t * c.n_rot]);
  }
}

}  // namespace nexus
