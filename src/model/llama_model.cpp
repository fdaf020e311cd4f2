// Binding a file's tensors by its family's table (model/arch.cpp).
#include "model/llama_model.h"

#include <set>
#include <string>

#include "gguf/gguf_file.h"
#include "kernels/f32_panels.h"
#include "kernels/weight_kernels.h"
#include "util/error.h"

namespace nexus {
namespace {

// Binds tensor `name` and checks it is [n_rows, n_cols] (GGUF ne = {n_cols, n_rows}).
WeightView bind(const GgufFile& gguf, const std::string& name, int64_t n_rows, int64_t n_cols) {
  const TensorInfo* t = gguf.find_tensor(name);
  if (!t) throw Error(gguf.path() + ": missing tensor " + name);
  const uint64_t rows = t->ne.size() >= 2 ? t->n_elements() / t->ne[0] : 1;
  if (t->ne.empty() || static_cast<int64_t>(t->ne[0]) != n_cols || static_cast<int64_t>(rows) != n_rows)
    throw Error(gguf.path() + ": tensor " + name + " has shape " + std::to_string(rows) + "x" +
                std::to_string(t->ne.empty() ? 0 : t->ne[0]) + ", expected " + std::to_string(n_rows) + "x" +
                std::to_string(n_cols));
  if (!type_kernels(t->type))
    throw Error(gguf.path() + ": tensor " + name + " has type " + std::string(ggml_type_name(t->type)) +
                ", which this build cannot compute with (supported: " + supported_weight_types() + ")");
  if (n_rows == 1 && n_cols > 1 && t->type != GgmlType::F32)
    throw Error(gguf.path() + ": norm or bias tensor " + name + " must be F32");
  WeightView w;
  w.type = t->type;
  w.data = t->data;
  w.n_rows = n_rows;
  w.n_cols = n_cols;
  w.row_bytes = ggml_row_size(t->type, static_cast<uint64_t>(n_cols));
  return w;
}

// Rows [r0, r0 + n) of w: a fused tensor's part (rows are contiguous).
WeightView rows_of(const WeightView& w, int64_t r0, int64_t n) {
  WeightView v = w;
  v.data = w.row(r0);
  v.n_rows = n;
  return v;
}

struct Slot {
  WeightView LlamaLayer::* field;
  int64_t rows, cols;
};

// Where each layer tensor goes and its shape under config c (fused ones
// are bound whole into a scratch view and split after).
Slot layer_slot(LayerTensor t, const LlamaConfig& c) {
  const int64_t E = c.n_embd, Q = c.n_embd_q(), KV = c.n_embd_kv(), F = c.n_ff, D = c.head_dim;
  using L = LayerTensor;
  switch (t) {
    case L::AttnNorm: return {&LlamaLayer::attn_norm, 1, E};
    case L::AttnNormB: return {&LlamaLayer::attn_norm_b, 1, E};
    case L::Wq: return {&LlamaLayer::wq, Q, E};
    case L::Wk: return {&LlamaLayer::wk, KV, E};
    case L::Wv: return {&LlamaLayer::wv, KV, E};
    case L::Wqkv: return {nullptr, Q + 2 * KV, E};
    case L::Bq: return {&LlamaLayer::bq, 1, Q};
    case L::Bk: return {&LlamaLayer::bk, 1, KV};
    case L::Bv: return {&LlamaLayer::bv, 1, KV};
    case L::QNorm: return {&LlamaLayer::q_norm, 1, D};
    case L::KNorm: return {&LlamaLayer::k_norm, 1, D};
    case L::Wo: return {&LlamaLayer::wo, E, Q};
    case L::Bo: return {&LlamaLayer::bo, 1, E};
    case L::AttnPostNorm: return {&LlamaLayer::attn_post_norm, 1, E};
    case L::FfnNorm: return {&LlamaLayer::ffn_norm, 1, E};
    case L::FfnNormB: return {&LlamaLayer::ffn_norm_b, 1, E};
    case L::WGate: return {&LlamaLayer::w_gate, F, E};
    case L::WUp: return {&LlamaLayer::w_up, F, E};
    case L::WUpFused: return {nullptr, 2 * F, E};
    case L::BUp: return {&LlamaLayer::b_up, 1, F};
    case L::WDown: return {&LlamaLayer::w_down, E, F};
    case L::BDown: return {&LlamaLayer::b_down, 1, E};
    case L::FfnPostNorm: return {&LlamaLayer::ffn_post_norm, 1, E};
  }
  return {nullptr, 0, 0};
}

}  // namespace

LlamaModel::LlamaModel(const GgufFile& gguf) : config_(LlamaConfig::from_gguf(gguf)) {
  const LlamaConfig& c = config_;
  const ArchTraits& arch = *c.traits;
  std::set<std::string> used;
  auto bind_used = [&](const std::string& name, int64_t rows, int64_t cols) {
    used.insert(name);
    return bind(gguf, name, rows, cols);
  };

  const TensorInfo* embd = gguf.find_tensor("token_embd.weight");
  if (!embd || embd->ne.size() != 2) throw Error(gguf.path() + ": missing or malformed tensor token_embd.weight");
  config_.n_vocab = static_cast<int32_t>(embd->ne[1]);
  for (const TensorUse<ModelTensor>& u : model_tensors(arch)) {
    const std::string name = tensor_name(u.role);
    if (u.need == Need::Optional && !gguf.find_tensor(name)) continue;
    switch (u.role) {
      case ModelTensor::TokEmbd: tok_embd_ = bind_used(name, c.n_vocab, c.n_embd); break;
      case ModelTensor::OutputNorm: output_norm_ = bind_used(name, 1, c.n_embd); break;
      case ModelTensor::OutputNormB: output_norm_b_ = bind_used(name, 1, c.n_embd); break;
      case ModelTensor::Output: output_ = bind_used(name, c.n_vocab, c.n_embd); break;
      case ModelTensor::RopeFreqs: rope_factors_ = bind_used(name, 1, c.n_rot / 2); break;
      case ModelTensor::RopeLong:
      case ModelTensor::RopeShort:
        throw Error(gguf.path() + ": tensor " + name + " (LongRoPE factors) is not implemented");
    }
  }
  if (!has(output_)) output_ = tok_embd_;  // tied embeddings

  layers_.resize(static_cast<size_t>(c.n_layer));
  for (int32_t l = 0; l < c.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    LlamaLayer& L = layers_[static_cast<size_t>(l)];
    for (const TensorUse<LayerTensor>& u : layer_tensors(arch)) {
      const std::string name = p + tensor_name(u.role);
      if (u.need == Need::Optional && !gguf.find_tensor(name)) continue;
      const Slot s = layer_slot(u.role, c);
      const WeightView w = bind_used(name, s.rows, s.cols);
      if (s.field) {
        L.*s.field = w;
      } else if (u.role == LayerTensor::Wqkv) {  // Q rows, then K, then V
        fused_qkv_ = true;
        L.wq = rows_of(w, 0, c.n_embd_q());
        L.wk = rows_of(w, c.n_embd_q(), c.n_embd_kv());
        L.wv = rows_of(w, c.n_embd_q() + c.n_embd_kv(), c.n_embd_kv());
      } else {  // fused ffn_up: gate rows, then up rows
        fused_gate_up_ = true;
        L.w_gate = rows_of(w, 0, c.n_ff);
        L.w_up = rows_of(w, c.n_ff, c.n_ff);
      }
    }
    // Families whose tables make a tensor optional one way or another.
    if (!has(L.wq) || !has(L.wk) || !has(L.wv))
      throw Error(gguf.path() + ": missing tensor " + p + "attn_qkv.weight (or " + p + "attn_q/k/v.weight)");
    if (arch.gated_ffn && !has(L.w_gate)) throw Error(gguf.path() + ": missing tensor " + p + "ffn_gate.weight");
  }
  for (const TensorInfo& t : gguf.tensors())
    if (!used.count(t.name))
      throw Error(gguf.path() + ": tensor " + t.name + " is not used by architecture " + c.arch +
                  " (Nexus does not implement it)");

  auto pack = [this](WeightView& w) {
    if (!has(w)) return;
    if (auto p = pack_f32_panels(w)) {
      w.panels = p.get();
      panels_.push_back(std::move(p));
    }
  };
  pack(output_);  // not tok_embd_: embedding lookups read its rows
  for (LlamaLayer& L : layers_)
    for (auto m : LlamaLayer::matrices()) pack(L.*m);
}

uint64_t LlamaModel::weight_bytes() const {
  uint64_t total = output_norm_.n_bytes() + output_norm_b_.n_bytes() + output_.n_bytes();
  for (const LlamaLayer& L : layers_)
    for (auto m : LlamaLayer::all()) total += (L.*m).n_bytes();
  return total;
}

std::string LlamaModel::describe() const {
  const LlamaConfig& c = config_;
  const ArchTraits& t = *c.traits;
  const LlamaLayer& L = layers_.front();
  auto fmt_f = [](float v) {
    std::string s = std::to_string(v);
    s.erase(s.find_last_not_of('0') + 1);
    if (s.back() == '.') s.pop_back();
    return s;
  };
  std::string s = c.arch + ": " + std::to_string(c.n_layer) + " layers, dim " + std::to_string(c.n_embd) + ", " +
                  std::to_string(c.n_head) + " heads of " + std::to_string(c.head_dim) + " (" +
                  std::to_string(c.n_head_kv) + " KV), FFN " + std::to_string(c.n_ff) + ", context " +
                  std::to_string(c.n_ctx_train);
  auto add = [&](bool on, const std::string& what) {
    if (on) s += ", " + what;
  };
  s += t.rope == RopeType::Neox ? ", NEOX RoPE" : ", NORM RoPE";
  add(has(rope_factors_), "rope_freqs factors");
  add(c.rope_freq_scale != 1.0f, "linear RoPE scaling x" + fmt_f(1.0f / c.rope_freq_scale));
  s += t.norm == NormType::Layer ? ", LayerNorm" : ", RMSNorm";
  if (has(L.w_gate)) s += t.act == FfnAct::Silu ? ", SwiGLU FFN" : ", GEGLU FFN";
  else s += t.act == FfnAct::Gelu ? ", GELU MLP" : ", SiLU MLP";
  add(fused_qkv_, "fused attn_qkv");
  add(fused_gate_up_, "fused gate+up");
  add(has(L.bq), "Q/K/V biases");
  add(has(L.bo) || has(L.b_down), "output/FFN biases");
  add(has(L.q_norm), "QK-norm");
  add(has(L.attn_post_norm), "post-attention/FFN norms");
  add(c.embd_scale != 1.0f, "embeddings x sqrt(n_embd)");
  add(c.attn_softcap > 0, "attention soft-cap " + fmt_f(c.attn_softcap));
  add(c.final_softcap > 0, "final soft-cap " + fmt_f(c.final_softcap));
  if (c.n_swa > 0) {
    int32_t n = 0;
    for (int32_t l = 0; l < c.n_layer; ++l) n += c.is_swa(l);
    s += ", sliding window " + std::to_string(c.n_swa) + " on " + std::to_string(n) + " of " +
         std::to_string(c.n_layer) + " layers";
  }
  s += output_.data == tok_embd_.data ? ", tied output" : ", untied output";
  return s;
}

}  // namespace nexus
