#include "store/registry.h"

#include <cstdlib>

#include <fmt/format.h>

namespace nexus::store {
namespace {

std::string env_or(const char* name, std::string fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

std::string without_trailing_slash(std::string s) {
  while (!s.empty() && s.back() == '/') s.pop_back();
  return s;
}

}  // namespace

RegistryConfig RegistryConfig::from_env() {
  RegistryConfig c;
  c.hf_endpoint = without_trailing_slash(env_or("HF_ENDPOINT", c.hf_endpoint));
  c.hf_token = env_or("HF_TOKEN", "");
  c.ollama_registry = without_trailing_slash(env_or("NEXUS_OLLAMA_REGISTRY", c.ollama_registry));
  return c;
}

void require_ok(const HttpResponse& r, const std::string& what, const std::string& url, const std::string& hint) {
  if (r.status >= 200 && r.status < 300) return;
  if (r.status == 404) throw Error(fmt::format("{}: not found at {} (HTTP 404)", what, url));
  if (r.status == 401 || r.status == 403)
    throw Error(fmt::format("{}: access denied by {} (HTTP {}){}", what, url_host(url), r.status, hint));
  throw Error(fmt::format("{}: {} answered HTTP {} for {}", what, url_host(url), r.status, url));
}

RemoteFile resolve_remote(const ModelRef& ref, const RegistryConfig& cfg) {
  return ref.registry == Registry::HuggingFace ? resolve_hf(ref, cfg) : resolve_ollama(ref, cfg);
}

}  // namespace nexus::store
