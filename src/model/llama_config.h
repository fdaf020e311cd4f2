// LlamaConfig: hyper-parameters of a GGUF `llama`-architecture model, read
// from its metadata (GGUF spec, "LLM" keys: {arch}.context_length,
// .embedding_length, .block_count, .feed_forward_length,
// .attention.head_count, .attention.head_count_kv,
// .attention.layer_norm_rms_epsilon, .rope.freq_base, .rope.dimension_count).
#pragma once

#include <cstdint>
#include <string>

namespace nexus {

class GgufFile;

struct LlamaConfig {
  std::string arch;          // general.architecture ("llama", ...)
  std::string name;          // general.name, or the file's stem
  int32_t n_vocab = 0;       // tokens
  int32_t n_ctx_train = 0;   // tokens the model was trained for
  int32_t n_embd = 0;        // hidden size
  int32_t n_layer = 0;
  int32_t n_head = 0;        // query heads
  int32_t n_head_kv = 0;     // key/value heads (GQA: n_head % n_head_kv == 0)
  int32_t head_dim = 0;      // n_embd / n_head
  int32_t n_ff = 0;          // FFN hidden size
  int32_t n_rot = 0;         // RoPE dimensions per head (<= head_dim)
  float rms_eps = 1e-5f;
  float rope_freq_base = 10000.0f;

  int32_t n_embd_kv() const { return n_head_kv * head_dim; }

  // Reads and validates the hyper-parameters; throws nexus::Error naming the
  // missing or inconsistent key.
  static LlamaConfig from_gguf(const GgufFile& gguf);
};

}  // namespace nexus
