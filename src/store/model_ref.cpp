#include "store/model_ref.h"

#include <cctype>

#include "util/error.h"

namespace nexus::store {
namespace {

constexpr std::string_view kHfForm = "expected hf:OWNER/REPO, hf:OWNER/REPO:QUANT or hf:OWNER/REPO/FILE.gguf";
constexpr std::string_view kOllamaForm = "expected ollama:NAME, ollama:NAME:TAG or ollama:USER/NAME:TAG";

bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-'; }

// One path component: non-empty, not "." or "..", characters of names only.
void check_component(std::string_view part, std::string_view what, std::string_view ref) {
  bool ok = !part.empty() && part != "." && part != "..";
  for (char c : part) ok = ok && name_char(c);
  if (!ok) throw Error(std::string(ref) + ": bad " + std::string(what) + " '" + std::string(part) + "'");
}

ModelRef parse_hf(std::string_view ref, std::string_view rest) {
  ModelRef r;
  r.registry = Registry::HuggingFace;
  const size_t slash = rest.find('/');
  if (slash == std::string_view::npos) throw Error(std::string(ref) + ": " + std::string(kHfForm));
  r.owner = rest.substr(0, slash);
  rest.remove_prefix(slash + 1);
  const size_t end = rest.find_first_of("/:");
  r.repo = rest.substr(0, end);
  check_component(r.owner, "owner", ref);
  check_component(r.repo, "repository", ref);
  if (end == std::string_view::npos) return r;
  const std::string_view tail = rest.substr(end + 1);
  if (rest[end] == ':') {
    check_component(tail, "quantization tag", ref);
    r.quant = tail;
    return r;
  }
  // A file path inside the repository: components checked one by one.
  if (tail.size() < 6 || tail.substr(tail.size() - 5) != ".gguf")
    throw Error(std::string(ref) + ": the file must be a .gguf (" + std::string(kHfForm) + ")");
  for (size_t at = 0; at <= tail.size();) {
    const size_t next = std::min(tail.find('/', at), tail.size());
    check_component(tail.substr(at, next - at), "file path component", ref);
    at = next + 1;
  }
  r.file = tail;
  return r;
}

ModelRef parse_ollama(std::string_view ref, std::string_view rest) {
  ModelRef r;
  r.registry = Registry::Ollama;
  const size_t colon = rest.find(':');
  std::string_view name = rest.substr(0, colon);
  r.tag = colon == std::string_view::npos ? "latest" : std::string(rest.substr(colon + 1));
  if (name.empty()) throw Error(std::string(ref) + ": " + std::string(kOllamaForm));
  const size_t slash = name.find('/');
  if (slash != std::string_view::npos) {
    check_component(name.substr(0, slash), "namespace", ref);
    check_component(name.substr(slash + 1), "model name", ref);
  } else {
    check_component(name, "model name", ref);
  }
  check_component(r.tag, "tag", ref);
  r.name = name;
  return r;
}

}  // namespace

bool is_model_ref(std::string_view s) { return s.starts_with("hf:") || s.starts_with("ollama:"); }

ModelRef parse_model_ref(std::string_view s) {
  ModelRef r;
  if (s.starts_with("hf:")) {
    r = parse_hf(s, s.substr(3));
  } else if (s.starts_with("ollama:")) {
    r = parse_ollama(s, s.substr(7));
  } else {
    throw Error(std::string(s) + ": not a model reference (hf:OWNER/REPO[:QUANT] or ollama:NAME[:TAG])");
  }
  r.text = s;
  return r;
}

bool file_has_quant(std::string_view file_name, std::string_view quant) {
  auto up = [](char c) { return static_cast<char>(std::toupper(static_cast<unsigned char>(c))); };
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  if (quant.empty() || quant.size() > file_name.size()) return false;
  for (size_t at = 0; at + quant.size() <= file_name.size(); ++at) {
    bool same = true;
    for (size_t i = 0; same && i < quant.size(); ++i) same = up(file_name[at + i]) == up(quant[i]);
    if (!same) continue;
    const bool left = at == 0 || !word(file_name[at - 1]);
    const size_t end = at + quant.size();
    const bool right = end == file_name.size() || !word(file_name[end]);
    if (left && right) return true;
  }
  return false;
}

}  // namespace nexus::store
