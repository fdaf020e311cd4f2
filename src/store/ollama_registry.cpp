// The Ollama registry (an OCI distribution registry):
//   GET {registry}/v2/NS/NAME/manifests/TAG  (Accept: the Docker v2 manifest)
// lists layers {"mediaType", "digest": "sha256:HEX", "size"}; the weights are
// the layer of mediaType application/vnd.ollama.image.model, a GGUF file, at
//   GET {registry}/v2/NS/NAME/blobs/sha256:HEX  (a redirect to a CDN).
// NS is "library" for unqualified names. Source: ollama's server/images.go
// (pullModelManifest) and the OCI distribution spec.
#include <algorithm>
#include <cctype>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "store/registry.h"

namespace nexus::store {

RemoteFile resolve_ollama(const ModelRef& ref, const RegistryConfig& cfg) {
  const size_t slash = ref.name.find('/');
  const std::string ns = slash == std::string::npos ? "library" : ref.name.substr(0, slash);
  const std::string name = slash == std::string::npos ? ref.name : ref.name.substr(slash + 1);
  const std::string url = fmt::format("{}/v2/{}/{}/manifests/{}", cfg.ollama_registry, ns, name, ref.tag);
  const HttpResponse r = http_fetch({url, {"Accept: application/vnd.docker.distribution.manifest.v2+json"}});
  require_ok(r, ref.text, url, "");
  std::string digest;
  uint64_t size = 0;
  try {
    const nlohmann::json j = nlohmann::json::parse(r.body);
    for (const auto& layer : j.at("layers")) {
      if (layer.value("mediaType", "") != "application/vnd.ollama.image.model") continue;
      digest = layer.at("digest").get<std::string>();
      if (layer.contains("size") && layer["size"].is_number_unsigned()) size = layer["size"].get<uint64_t>();
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: the manifest from {} is not one: {}", ref.text, url, e.what()));
  }
  if (digest.empty()) throw Error(fmt::format("{}: the manifest at {} has no model layer", ref.text, url));
  const std::string hex = digest.starts_with("sha256:") ? digest.substr(7) : "";
  if (hex.size() != 64 || !std::all_of(hex.begin(), hex.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); }))
    throw Error(fmt::format("{}: the model layer's digest '{}' is not a SHA-256", ref.text, digest));

  RemoteFile f;
  f.name = fmt::format("ollama:{}:{}", ns == "library" ? name : ns + "/" + name, ref.tag);
  f.store_rel = fmt::format("ollama/{}/{}/{}.gguf", ns, name, ref.tag);
  f.url = fmt::format("{}/v2/{}/{}/blobs/{}", cfg.ollama_registry, ns, name, digest);
  f.sha256 = hex;
  for (char& c : f.sha256) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  f.size = size;
  return f;
}

}  // namespace nexus::store
