// Binding a file's tensors by its family's table (model/arch.cpp).
#include "model/llama_model.h"

#include <set>
#include <utility>
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

// Where each layer tensor goes and its shape under config c (arch.cpp's
// tensor_shape; fused ones are bound whole into a scratch view and split after).
Slot layer_slot(LayerTensor t, const LlamaConfig& c) {
  const TensorShape sh = tensor_shape(
      t, {c.n_embd, c.n_embd_q(), c.n_embd_kv(), c.n_ff, c.head_dim, c.n_vocab, c.n_rot});
  using L = LayerTensor;
  WeightView LlamaLayer::* field = nullptr;
  switch (t) {
    case L::AttnNorm: field = &LlamaLayer::attn_norm; break;
    case L::AttnNormB: field = &LlamaLayer::attn_norm_b; break;
    case L::Wq: field = &LlamaLayer::wq; break;
    case L::Wk: field = &LlamaLayer::wk; break;
    case L::Wv: field = &LlamaLayer::wv; break;
    case L::Wqkv: break;
    case L::Bq: field = &LlamaLayer::bq; break;
    case L::Bk: field = &LlamaLayer::bk; break;
    case L::Bv: field = &LlamaLayer::bv; break;
    case L::QNorm: field = &LlamaLayer::q_norm; break;
    case L::KNorm: field = &LlamaLayer::k_norm; break;
    case L::Wo: field = &LlamaLayer::wo; break;
    case L::Bo: field = &LlamaLayer::bo; break;
    case L::AttnPostNorm: field = &LlamaLayer::attn_post_norm; break;
    case L::FfnNorm: field = &LlamaLayer::ffn_norm; break;
    case L::FfnNormB: field = &LlamaLayer::ffn_norm_b; break;
    case L::WGate: field = &LlamaLayer::w_gate; break;
    case L::WUp: field = &LlamaLayer::w_up; break;
    case L::WUpFused: break;
    case L::BUp: field = &LlamaLayer::b_up; break;
    case L::WDown: field = &LlamaLayer::w_down; break;
    case L::BDown: field = &LlamaLayer::b_down; break;
    case L::FfnPostNorm: field = &LlamaLayer::ffn_post_norm; break;
  }
  return {field, sh.rows, sh.cols};
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
      case ModelTensor::RopeLong: rope_long_ = bind_used(name, 1, c.n_rot / 2); break;
      case ModelTensor::RopeShort: rope_short_ = bind_used(name, 1, c.n_rot / 2); break;
    }
  }
  if (!has(output_)) output_ = tok_embd_;  // tied embeddings
  for (const auto& [w, name] : {std::pair{&rope_factors_, "rope_freqs.weight"},
                                {&rope_long_, "rope_factors_long.weight"}, {&rope_short_, "rope_factors_short.weight"}})
    if (has(*w) && w->type != GgmlType::F32) throw Error(gguf.path() + ": tensor " + std::string(name) + " must be F32");
  if (c.rope_scaling == RopeScaling::LongRope && !has(rope_long_) && !has(rope_short_))
    throw Error(gguf.path() + ": rope.scaling.type longrope without rope_factors_long/short.weight tensors");

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

const float* LlamaModel::rope_factors_for(int32_t n_ctx) const {
  if (has(rope_factors_)) return rope_factors_.f32();
  if (n_ctx <= 0) n_ctx = config_.n_ctx_train;
  return n_ctx > config_.n_ctx_orig ? rope_long_.f32() : rope_short_.f32();
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
  add(has(rope_long_) || has(rope_short_),
      "LongRoPE factors (long above context " + std::to_string(c.n_ctx_orig) + ")");
  if (c.rope_scaling == RopeScaling::Yarn)
    s += ", YaRN RoPE scaling x" + fmt_f(1.0f / c.rope_freq_scale) + " from context " + std::to_string(c.n_ctx_orig);
  else add(c.rope_freq_scale != 1.0f, "linear RoPE scaling x" + fmt_f(1.0f / c.rope_freq_scale));
  add(c.rope_attn_factor != 1.0f, "RoPE attention factor " + fmt_f(c.rope_attn_factor));
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
