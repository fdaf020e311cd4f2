// Quantization mixes: which type each tensor of a model gets for a target
// such as Q4_K_M, the way llama-quantize chooses it without an importance
// matrix.
//
// Source: llama.cpp's src/llama-quant.cpp (llama_tensor_get_type, the
// ftype -> default type switch of llama_model_quantize_impl, the "quantize
// this tensor?" checks) and include/llama.h (enum llama_ftype), build of
// early 2025. docs/quantize.md lists the rules in prose. In short:
//   - Only matrices are converted: tensors of 2 or more dimensions whose name
//     ends in "weight", except norms ("_norm.weight"), MoE routers
//     ("ffn_gate_inp.weight") and a few small special tensors; everything
//     else (1-D norms, biases) is copied as it is.
//   - A mix has a default type (Q4_K for Q4_K_M). For quantized defaults the
//     per-tensor rules below may give a tensor more bits; F32 / F16 / BF16
//     mixes convert every matrix to that type.
//   - output.weight (or token_embd.weight when there is no output.weight,
//     tied embeddings): Q6_K unless the mix is Q8_0 (stays Q8_0), Q8_0 when
//     its rows are not a multiple of 256.
//   - attn_v, ffn_down, attn_output get more bits in the _M / _L mixes and
//     Q2_K, by layer: use_more_bits(i, n) = i < n/8 || i >= 7n/8 ||
//     (i - n/8) % 3 == 2 (integer division), i counted in processing order.
//   - Grouped-query attention (n_head / n_head_kv >= 4) raises attn_v for
//     Q2_K and IQ4_NL / IQ4_XS; 8-expert models raise attn_v / attn_k to
//     Q8_0 and attn_output to Q5_K; llama 70B-type models (80 layers, GQA)
//     raise Q3_K / Q4_K attn_v to Q5_K.
//   - Fallback when a row is not a multiple of the chosen type's block:
//     Q2_K, Q3_K, IQ4_XS -> IQ4_NL; Q4_K -> Q5_0; Q5_K -> Q5_1; Q6_K -> Q8_0;
//     F16 when even that does not divide the row. Where llama.cpp has no
//     fallback (a 32-block type on a row that is not a multiple of 32) it
//     refuses the model; nexus stores that tensor as F16 instead.
// Falcon's own rules (llama.cpp special-cases LLM_ARCH_FALCON) are not
// implemented: every architecture gets the general ones.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/ggml_type.h"

namespace nexus {

class GgufFile;

// A target of `nexus quantize` / `llama-quantize`.
struct QuantMix {
  std::string_view name;  // "Q4_K_M"
  uint32_t ftype;         // llama.cpp's LLAMA_FTYPE_* value, written as general.file_type
  GgmlType default_type;  // what a matrix gets when no rule says otherwise
  std::string_view description;
};

// Every supported mix, smallest to largest within each family.
const std::vector<QuantMix>& quant_mixes();
// The mix named `name` (case-insensitive), or nullptr.
const QuantMix* find_quant_mix(std::string_view name);
// "F32, F16, ..., IQ4_XS": for error messages and --help.
std::string quant_mix_names();

// Whether quantize_row_ref can write `t` (the types a mix or an override may
// choose).
bool quantize_writable_type(GgmlType t);
// The writable type named `name` (ggml's names, case-insensitive), or nullopt.
std::optional<GgmlType> parse_writable_type(std::string_view name);

// ggml_n_dims: the number of dimensions less trailing ones of size 1.
int tensor_n_dims(std::span<const uint64_t> ne);

// llama.cpp's "is this tensor quantized at all" test (name and shape only).
bool tensor_is_quantizable(const std::string& name, std::span<const uint64_t> ne);

// What the rules need to know about the model, from its metadata and tensor
// names. Throws nexus::Error when {arch}.block_count is missing.
struct MixModelInfo {
  std::string arch;
  int32_t n_layer = 0;
  int32_t n_head = 0, n_head_kv = 0;  // layer 0's, as llama.cpp's n_gqa() reads them
  int32_t n_expert = 0;
  int32_t n_attention_wv = 0;  // tensors named *attn_v.weight, *attn_qkv.weight, *attn_kv_b.weight
  bool has_output = false;     // an output.weight tensor (false: token_embd doubles as it)
  bool is_70b = false;         // llama.cpp's LLM_TYPE_70B for arch llama: 80 layers, n_head != n_head_kv
  int32_t n_gqa() const { return n_head_kv > 0 ? n_head / n_head_kv : 0; }
};
MixModelInfo mix_model_info(const GgufFile& file);

// llama_tensor_get_type. Holds the per-kind counters llama.cpp keeps
// (attn_v, ffn_down, ffn_gate, ffn_up seen so far), so call tensor_type once
// per quantizable tensor, in llama.cpp's processing order (non-layer tensors
// first, then layer by layer, by name within each: see quantize_model.h).
// Only for mixes whose default type is quantized.
class MixRules {
 public:
  // output_type: --output-type, which llama.cpp also applies here to a tied
  // token_embd.weight.
  MixRules(const QuantMix& mix, const MixModelInfo& model, std::optional<GgmlType> output_type = std::nullopt);

  struct Choice {
    GgmlType type;
    std::string fallback;  // empty, or why the row length forced another type
  };
  // ne: ggml order (ne[0] = row length). Throws nexus::Error for a layer
  // number it cannot read in an MoE model.
  Choice tensor_type(const std::string& name, std::span<const uint64_t> ne);

 private:
  GgmlType rule_type(const std::string& name, std::span<const uint64_t> ne);

  const QuantMix& mix_;
  MixModelInfo model_;
  std::optional<GgmlType> output_type_;
  int32_t i_attention_wv_ = 0, i_ffn_down_ = 0, i_ffn_gate_ = 0, i_ffn_up_ = 0;
};

// The row-length fallback alone: `type` when ne0 is a multiple of its
// block, otherwise llama.cpp's replacement (F16 as the last resort).
GgmlType fallback_type(GgmlType type, uint64_t ne0);

}  // namespace nexus
