#include "model/llama_model.h"

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
    throw Error(gguf.path() + ": norm tensor " + name + " must be F32");
  WeightView w;
  w.type = t->type;
  w.data = t->data;
  w.n_rows = n_rows;
  w.n_cols = n_cols;
  w.row_bytes = ggml_row_size(t->type, static_cast<uint64_t>(n_cols));
  return w;
}

}  // namespace

LlamaModel::LlamaModel(const GgufFile& gguf) : config_(LlamaConfig::from_gguf(gguf)) {
  const LlamaConfig& c = config_;
  const TensorInfo* embd = gguf.find_tensor("token_embd.weight");
  if (!embd || embd->ne.size() != 2) throw Error(gguf.path() + ": missing or malformed tensor token_embd.weight");
  config_.n_vocab = static_cast<int32_t>(embd->ne[1]);
  tok_embd_ = bind(gguf, "token_embd.weight", c.n_vocab, c.n_embd);
  output_norm_ = bind(gguf, "output_norm.weight", 1, c.n_embd);
  // Tied embeddings: models without output.weight reuse token_embd.weight.
  output_ = gguf.find_tensor("output.weight") ? bind(gguf, "output.weight", c.n_vocab, c.n_embd) : tok_embd_;
  layers_.resize(static_cast<size_t>(c.n_layer));
  for (int32_t l = 0; l < c.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    LlamaLayer& L = layers_[static_cast<size_t>(l)];
    L.attn_norm = bind(gguf, p + "attn_norm.weight", 1, c.n_embd);
    L.wq = bind(gguf, p + "attn_q.weight", c.n_embd, c.n_embd);
    L.wk = bind(gguf, p + "attn_k.weight", c.n_embd_kv(), c.n_embd);
    L.wv = bind(gguf, p + "attn_v.weight", c.n_embd_kv(), c.n_embd);
    L.wo = bind(gguf, p + "attn_output.weight", c.n_embd, c.n_embd);
    L.ffn_norm = bind(gguf, p + "ffn_norm.weight", 1, c.n_embd);
    L.w_gate = bind(gguf, p + "ffn_gate.weight", c.n_ff, c.n_embd);
    L.w_up = bind(gguf, p + "ffn_up.weight", c.n_ff, c.n_embd);
    L.w_down = bind(gguf, p + "ffn_down.weight", c.n_embd, c.n_ff);
  }
  auto pack = [this](WeightView& w) {
    if (auto p = pack_f32_panels(w)) {
      w.panels = p.get();
      panels_.push_back(std::move(p));
    }
  };
  pack(output_);  // not tok_embd_: embedding lookups read its rows
  for (LlamaLayer& L : layers_)
    for (WeightView* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) pack(*w);
}

uint64_t LlamaModel::weight_bytes() const {
  uint64_t total = output_norm_.n_bytes() + output_.n_bytes();
  for (const LlamaLayer& L : layers_)
    for (const WeightView* w : {&L.attn_norm, &L.wq, &L.wk, &L.wv, &L.wo, &L.ffn_norm, &L.w_gate, &L.w_up, &L.w_down})
      total += w->n_bytes();
  return total;
}

}  // namespace nexus
