#include "model/llama_config.h"

#include <filesystem>

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

}  // namespace

LlamaConfig LlamaConfig::from_gguf(const GgufFile& gguf) {
  LlamaConfig c;
  c.arch = gguf.get_string("general.architecture").value_or("");
  // Architectures whose graph is the llama one (same tensors, same math).
  if (c.arch != "llama" && c.arch != "mistral")
    throw Error(gguf.path() + ": unsupported architecture '" + c.arch + "' (supported: llama, mistral)");
  c.name = gguf.get_string("general.name").value_or(std::filesystem::path(gguf.path()).stem().string());
  const std::string a = c.arch + ".";
  c.n_ctx_train = require_int(gguf, a + "context_length");
  c.n_embd = require_int(gguf, a + "embedding_length");
  c.n_layer = require_int(gguf, a + "block_count");
  c.n_ff = require_int(gguf, a + "feed_forward_length");
  c.n_head = require_int(gguf, a + "attention.head_count");
  c.n_head_kv = gguf.get_int(a + "attention.head_count_kv") ? require_int(gguf, a + "attention.head_count_kv") : c.n_head;
  if (c.n_embd % c.n_head != 0) throw Error(gguf.path() + ": embedding_length is not a multiple of head_count");
  if (c.n_head % c.n_head_kv != 0) throw Error(gguf.path() + ": head_count is not a multiple of head_count_kv");
  c.head_dim = c.n_embd / c.n_head;
  c.n_rot = gguf.get_int(a + "rope.dimension_count") ? require_int(gguf, a + "rope.dimension_count") : c.head_dim;
  if (c.n_rot > c.head_dim || c.n_rot % 2 != 0) throw Error(gguf.path() + ": invalid rope.dimension_count");
  c.rms_eps = static_cast<float>(gguf.get_float(a + "attention.layer_norm_rms_epsilon").value_or(1e-5));
  c.rope_freq_base = static_cast<float>(gguf.get_float(a + "rope.freq_base").value_or(10000.0));
  if (!(c.rms_eps > 0) || !(c.rope_freq_base > 0)) throw Error(gguf.path() + ": invalid rms epsilon or rope base");
  return c;
}

}  // namespace nexus
