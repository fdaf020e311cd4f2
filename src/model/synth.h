// Synthetic models of any family Nexus runs (model/arch.h: llama, mistral,
// qwen2, qwen3, phi3, gemma2, gemma3, starcoder2): random weights in the
// shape of a real model, for benchmarks and tests (their output is noise,
// not language).
//
// The file is a GGUF v3 model of architecture shape.arch that the loader
// (llama_config.cpp, llama_model.cpp) reads like any other: the tensors of
// the family's table in arch.cpp (every Required one; of the Optional ones
// output.weight unless tied and phi3's fused attn_qkv, nothing else), shaped
// by arch.cpp's tensor_shape; the LLM metadata keys of the GGUF spec under
// the family's prefix (attention.layer_norm_epsilon for LayerNorm families,
// key_length / value_length when the head size is explicit or the family is
// qwen3, sliding_window, gemma2's soft-caps), general.name / file_type /
// quantization_version, and every
// tokenizer.* key copied from a vocabulary file (e.g. llama.cpp's
// ggml-vocab-*.gguf) so the model can also be driven through a tokenizer.
//
// Weights (all deterministic in the seed, whatever the thread count):
//   matrices [n_out, n_in]   ~ N(0, 1/n_in)  (std 1/sqrt(fan_in)), so every
//                            projection keeps unit variance and activations
//                            stay finite through any number of layers;
//   token_embd [vocab, n_embd] ~ N(0, 1/n_embd) (small; also sensible as the
//                            tied output projection);
//   norm weights             = 1.0, F32 (as the loader requires);
//   biases                   = 0.0, F32.
// The normal is approximated by a sum of four uniforms (Irwin-Hall), which
// is bell-shaped and bounded (|x| <= 3.46 std), from xoshiro256**.
// Matrices are stored as `type`; a matrix whose rows are not a multiple of
// the type's block size (e.g. FFN 172 with Q8_0) falls back to F16, as
// llama.cpp's quantizer does for such tensors.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/ggml_type.h"

namespace nexus {

struct SynthShape {
  std::string arch = "llama";  // general.architecture: a family of model/arch.h
  int32_t n_embd = 0;     // hidden size
  int32_t n_layer = 0;
  int32_t n_head = 0;     // query heads; n_embd % n_head == 0 unless head_dim is given
  int32_t head_dim = 0;   // per-head size (attention.key_length); 0 = n_embd / n_head
  int32_t n_head_kv = 0;  // key/value heads; n_head % n_head_kv == 0
  int32_t n_ff = 0;       // FFN hidden size
  int32_t n_vocab = 0;    // tokens; overridden by the vocabulary file's count
  int32_t n_ctx = 0;      // training context written to the metadata (tokens)
  bool tied = false;      // no output.weight: the output reuses token_embd
  float rms_eps = 1e-5f;
  float rope_freq_base = 10000.0f;
  int32_t n_swa = 0;          // attention.sliding_window (positions); 0 = none
  float attn_softcap = 0.0f;  // gemma2's attn_logit_softcapping; 0 = none
  float final_softcap = 0.0f; // gemma2's final_logit_softcapping; 0 = none

  int32_t head_size() const { return head_dim > 0 ? head_dim : n_embd / n_head; }
};

// Presets. Llama shapes (architecture llama): "tinyllama-1.1b",
// "llama-3.2-1b", "qwen2.5-0.5b" (Qwen's shape written as llama),
// "stories260k-shape". Family presets, each its real model's shape,
// vocabulary size and family metadata: "qwen2.5-1.5b" (qwen2), "qwen3-1.7b"
// (qwen3), "phi3-mini" (phi3, 3.8B), "gemma2-2b" (gemma2), "gemma3-1b"
// (gemma3), "starcoder2-3b" (starcoder2).
const std::vector<std::string>& synth_preset_names();
// Throws nexus::Error naming the presets for an unknown name.
SynthShape synth_preset(std::string_view name);

// The family names synth writes (every family of model/arch.h).
const std::vector<std::string>& synth_arch_names();
// Makes `shape` a model of family `arch` (lower case; throws nexus::Error
// naming the families for an unknown one): sets shape.arch and the family's
// metadata a real file carries: gemma2 soft-caps 50 / 30 and a 4096 window,
// gemma3 a 512 window (a change of family first clears window and caps;
// the same family keeps the shape's own).
void synth_set_arch(SynthShape& shape, std::string_view arch);

struct SynthOptions {
  SynthShape shape;
  GgmlType type = GgmlType::F32;  // matrices: F32, F16, BF16, Q8_0 or Q4_0
  std::string vocab_path;         // GGUF to copy tokenizer.* from; empty: none
  std::string name;               // general.name; empty: "synth-<dims>-<type>"
  uint64_t seed = 1;
  int32_t n_threads = 0;          // 0 = hardware concurrency
};

struct SynthResult {
  SynthShape shape;      // as written (n_vocab from the vocabulary file)
  uint64_t n_params = 0;
  uint64_t file_bytes = 0;
  int32_t n_fallback_f16 = 0;  // matrices stored as F16 instead of `type`
};

// Checks the shape (positive dims, divisibility); throws nexus::Error.
void synth_validate(const SynthShape& shape);
// Number of weights of a model of this shape.
uint64_t synth_param_count(const SynthShape& shape);

// Writes the model to `out_path` (atomically: nothing is left there on
// failure). With a vocabulary file, n_vocab is its token count (shape.n_vocab
// is ignored). Throws nexus::Error for a bad shape or type, an unreadable
// vocabulary file or one without tokenizer.ggml.tokens, or an I/O error.
SynthResult synth_model(const SynthOptions& opt, const std::string& out_path);

}  // namespace nexus
