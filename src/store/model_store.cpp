#include "store/model_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "gguf/gguf_file.h"
#include "model/quant_mix.h"
#include "util/error.h"

namespace nexus::store {
namespace fs = std::filesystem;
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

// The stored name of a file at `rel` (relative to the root), or "" when it is
// not where a pulled model would be.
std::string name_of(const fs::path& rel) {
  std::vector<std::string> parts;
  for (const auto& p : rel) parts.push_back(p.string());
  if (parts.size() >= 4 && parts[0] == "hf") {
    std::string file;
    for (size_t i = 3; i < parts.size(); ++i) file += (i > 3 ? "/" : "") + parts[i];
    return fmt::format("hf:{}/{}/{}", parts[1], parts[2], file);
  }
  if (parts.size() == 4 && parts[0] == "ollama" && parts[3].ends_with(".gguf")) {
    const std::string tag = parts[3].substr(0, parts[3].size() - 5);
    return fmt::format("ollama:{}:{}", parts[1] == "library" ? parts[2] : parts[1] + "/" + parts[2], tag);
  }
  return "";
}

std::string file_type(const GgufFile& f) {
  try {
    if (const auto ftype = f.get_int("general.file_type"))
      for (const QuantMix& m : quant_mixes())
        if (m.ftype == *ftype) return std::string(m.name);
  } catch (const Error&) {
    // Not an integer: fall back to the tensors.
  }
  std::map<std::string, uint64_t> bytes;
  for (const TensorInfo& t : f.tensors()) bytes[std::string(ggml_type_name(t.type))] += t.n_bytes;
  const auto top = std::max_element(bytes.begin(), bytes.end(),
                                    [](const auto& a, const auto& b) { return a.second < b.second; });
  return top == bytes.end() ? "?" : top->first;
}

std::vector<std::string> ggufs_under(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec))
    if (it->is_regular_file() && it->path().extension() == ".gguf") out.push_back(it->path().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::string store_root() {
  if (const std::string h = env("NEXUS_HOME"); !h.empty()) return (fs::path(h) / "models").string();
  if (const std::string x = env("XDG_CACHE_HOME"); !x.empty()) return (fs::path(x) / "nexus" / "models").string();
  if (const std::string home = env("HOME"); !home.empty())
    return (fs::path(home) / ".cache" / "nexus" / "models").string();
  throw Error("no model store: set NEXUS_HOME (or HOME)");
}

std::vector<StoredModel> list_models(const std::string& root) {
  std::vector<StoredModel> out;
  for (const std::string& path : ggufs_under(root)) {
    StoredModel m;
    m.name = name_of(fs::path(path).lexically_relative(root));
    if (m.name.empty()) continue;
    m.path = path;
    std::error_code ec;
    m.size = fs::file_size(path, ec);
    try {
      const GgufFile f(path);
      m.type = file_type(f);
      m.arch = f.get_string("general.architecture").value_or("?");
    } catch (const Error&) {
      m.type = m.arch = "?";
    }
    out.push_back(std::move(m));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

std::optional<std::string> find_local(const std::string& root, const ModelRef& ref) {
  std::error_code ec;
  if (ref.registry == Registry::Ollama) {
    const size_t slash = ref.name.find('/');
    const fs::path p = slash == std::string::npos ? fs::path(root) / "ollama" / "library" / ref.name
                                                  : fs::path(root) / "ollama" / ref.name;
    const fs::path file = p / (ref.tag + ".gguf");
    return fs::is_regular_file(file, ec) ? std::optional(file.string()) : std::nullopt;
  }
  const fs::path dir = fs::path(root) / "hf" / ref.owner / ref.repo;
  if (!ref.file.empty()) {
    const fs::path file = dir / ref.file;
    return fs::is_regular_file(file, ec) ? std::optional(file.string()) : std::nullopt;
  }
  const std::vector<std::string> all = ggufs_under(dir);
  std::vector<std::string> match;
  for (const std::string& f : all)
    if (ref.quant.empty() || file_has_quant(fs::path(f).filename().string(), ref.quant)) match.push_back(f);
  if (match.size() == 1) return match.front();
  if (match.size() > 1 && !ref.quant.empty())
    throw Error(fmt::format("{}: several stored files match; name one with /FILE.gguf", ref.text));
  return std::nullopt;  // none, or several with no tag: the registry decides
}

std::string remove_model(const std::string& root, const std::string& name) {
  std::optional<std::string> path;
  for (const StoredModel& m : list_models(root))
    if (m.name == name) path = m.path;
  if (!path && is_model_ref(name)) path = find_local(root, parse_model_ref(name));
  if (!path) throw Error(fmt::format("no model {} in the store {} (see nexus models)", name, root));
  const std::string lock = *path + ".lock";
  const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd >= 0 && ::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    throw Error(fmt::format("{}: a pull of it is running; try again when it ends", name));
  }
  const std::string stored = name_of(fs::path(*path).lexically_relative(root));
  std::error_code ec;
  fs::remove(*path, ec);
  if (ec) {
    if (fd >= 0) ::close(fd);
    throw Error(fmt::format("{}: cannot remove: {}", *path, ec.message()));
  }
  fs::remove(*path + ".partial", ec);
  fs::remove(lock, ec);
  if (fd >= 0) ::close(fd);
  // Empty folders up to the root go too.
  const fs::path top = fs::path(root).lexically_normal();
  for (fs::path dir = fs::path(*path).lexically_normal().parent_path();
       dir.native().size() > top.native().size() && dir.native().starts_with(top.native()) && fs::is_empty(dir, ec) && !ec;
       dir = dir.parent_path())
    fs::remove(dir, ec);
  return stored;
}

}  // namespace nexus::store
