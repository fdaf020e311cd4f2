// Where a model reference's file is on its registry: Hugging Face's file API
// (hf_registry.cpp) or the Ollama registry's manifests (ollama_registry.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "store/http_fetch.h"
#include "store/model_ref.h"

namespace nexus::store {

struct RegistryConfig {
  std::string hf_endpoint = "https://huggingface.co";       // HF_ENDPOINT
  std::string hf_token;                                      // HF_TOKEN: "Authorization: Bearer ..."
  std::string ollama_registry = "https://registry.ollama.ai";  // NEXUS_OLLAMA_REGISTRY
  static RegistryConfig from_env();
};

struct RemoteFile {
  std::string name;       // "hf:OWNER/REPO/FILE.gguf", "ollama:NAME:TAG": the stored model's name
  std::string store_rel;  // its path in the store: hf/OWNER/REPO/FILE.gguf, ollama/NS/NAME/TAG.gguf
  std::string url;        // where the bytes are (redirects followed)
  std::vector<std::string> headers;  // sent with it (Authorization)
  std::string sha256;     // lower-case hex, as the registry states it
  uint64_t size = 0;      // bytes, 0 when the registry does not say
};

// Asks the registry (network). Throws Error naming what went wrong: no such
// repository / file / tag (404), access denied (401/403, with the HF_TOKEN
// hint), no GGUF matching the tag (listing the files there), several
// matching, a registry that states no SHA-256; NetworkError when it cannot
// be reached.
RemoteFile resolve_remote(const ModelRef& ref, const RegistryConfig& cfg);
RemoteFile resolve_hf(const ModelRef& ref, const RegistryConfig& cfg);
RemoteFile resolve_ollama(const ModelRef& ref, const RegistryConfig& cfg);

// Throws Error for a status other than 2xx: "what: not found at URL (HTTP
// 404)", "access denied ... (HTTP 401)"; `hint` is added to 401/403.
void require_ok(const HttpResponse& r, const std::string& what, const std::string& url, const std::string& hint);

// Which of `files` (paths in a Hugging Face repository) `ref` names: its
// file, the one GGUF carrying its quantization tag, or with neither the only
// GGUF (else the Q4_K_M one). Throws Error listing the candidates when none
// or several match, and refuses split GGUFs (-00001-of-00003) by name.
std::string pick_hf_file(const ModelRef& ref, const std::vector<std::string>& files);

}  // namespace nexus::store
