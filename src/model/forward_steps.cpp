#include "model/forward_steps.h"

#include <string>

#include "kernels/dequant.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "model/llama_model.h"
#include "util/error.h"

namespace nexus {

void Activations::resize(const LlamaConfig& c, size_t n) {
  for (auto* b : {&x, &xb, &xb2, &q, &att}) b->resize(n * c.n_embd);
  for (auto* b : {&k, &v}) b->resize(n * c.n_embd_kv());
  for (auto* b : {&hb, &hb2}) b->resize(n * c.n_ff);
}

void check_token_ids(const LlamaConfig& c, std::span<const int32_t> tokens, const char* what) {
  for (int32_t id : tokens)
    if (id < 0 || id >= c.n_vocab) throw Error(std::string(what) + ": token id " + std::to_string(id) + " out of range");
}

void embed_tokens(const LlamaModel& model, std::span<const int32_t> tokens, Activations& a) {
  const int64_t E = model.config().n_embd;
  for (size_t t = 0; t < tokens.size(); ++t)
    dequantize_row(model.tok_embd().type, model.tok_embd().row(tokens[t]), &a.x[t * E], E);
}

void attention_inputs(const LlamaModel& model, const LlamaLayer& L, Activations& a, TokenRange r, ThreadPool& pool) {
  const LlamaConfig& c = model.config();
  const int64_t E = c.n_embd, KV = c.n_embd_kv();
  for (int64_t t = r.begin; t < r.end; ++t) rmsnorm(&a.xb[t * E], &a.x[t * E], L.attn_norm.f32(), E, c.rms_eps);
  const MatmulOut qkv[] = {{&L.wq, &a.q[r.begin * E]}, {&L.wk, &a.k[r.begin * KV]}, {&L.wv, &a.v[r.begin * KV]}};
  matmul_shared_input(qkv, &a.xb[r.begin * E], r.size(), pool);
}

void attention_output_and_ffn(const LlamaModel& model, const LlamaLayer& L, Activations& a, TokenRange r,
                              ThreadPool& pool) {
  const LlamaConfig& c = model.config();
  const int64_t E = c.n_embd, F = c.n_ff, n = r.size();
  float* x = &a.x[r.begin * E];
  float* xb = &a.xb[r.begin * E];
  float* xb2 = &a.xb2[r.begin * E];
  float* hb = &a.hb[r.begin * F];
  float* hb2 = &a.hb2[r.begin * F];
  matmul(L.wo, &a.att[r.begin * E], xb2, n, pool);
  for (int64_t i = 0; i < n * E; ++i) x[i] += xb2[i];

  for (int64_t t = 0; t < n; ++t) rmsnorm(&xb[t * E], &x[t * E], L.ffn_norm.f32(), E, c.rms_eps);
  const MatmulOut gate_up[] = {{&L.w_gate, hb}, {&L.w_up, hb2}};
  matmul_shared_input(gate_up, xb, n, pool);
  swiglu(hb, hb2, n * F);
  matmul(L.w_down, hb, xb2, n, pool);
  for (int64_t i = 0; i < n * E; ++i) x[i] += xb2[i];
}

void output_logits(const LlamaModel& model, Activations& a, std::span<const int32_t> rows, std::vector<float>& logits,
                   ThreadPool& pool) {
  const LlamaConfig& c = model.config();
  const int64_t E = c.n_embd;
  const int64_t n_out = static_cast<int64_t>(rows.size());
  for (int64_t i = 0; i < n_out; ++i)
    rmsnorm(&a.xb[i * E], &a.x[rows[i] * E], model.output_norm().f32(), E, c.rms_eps);
  logits.resize(static_cast<size_t>(n_out) * c.n_vocab);
  if (n_out > 0) matmul(model.output(), a.xb.data(), logits.data(), n_out, pool);
}

}  // namespace nexus
