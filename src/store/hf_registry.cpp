// Hugging Face Hub: the repository's file list from
//   GET {endpoint}/api/models/OWNER/REPO/tree/main?recursive=true
// (JSON array of {"type", "path", "size", "lfs": {"oid": SHA-256, "size"}},
// paged by a Link: <...>; rel="next" header), the file from
//   GET {endpoint}/OWNER/REPO/resolve/main/FILE   (a redirect to a CDN).
// Source: huggingface_hub's HfApi.list_repo_tree and hf_hub_url. A file
// without an LFS entry has its SHA-256 in the resolve URL's X-Linked-ETag.
#include <algorithm>
#include <cctype>
#include <regex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "store/registry.h"

namespace nexus::store {
namespace {

struct HfEntry {
  std::string path, sha256;
  uint64_t size = 0;
};

bool is_sha256(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string next_link(const HttpResponse& r) {
  const auto it = r.headers.find("link");
  if (it == r.headers.end()) return "";
  std::smatch m;
  static const std::regex next(R"(<([^>]+)>\s*;\s*rel="?next"?)");
  return std::regex_search(it->second, m, next) ? m[1].str() : "";
}

std::vector<HfEntry> list_tree(const ModelRef& ref, const RegistryConfig& cfg, const std::vector<std::string>& auth) {
  std::vector<HfEntry> out;
  std::string url = fmt::format("{}/api/models/{}/{}/tree/main?recursive=true", cfg.hf_endpoint, ref.owner, ref.repo);
  for (int page = 0; !url.empty() && page < 100; ++page) {
    const HttpResponse r = http_fetch({url, auth});
    require_ok(r, ref.text, url,
               cfg.hf_token.empty() ? ": a gated or private repository needs HF_TOKEN" : ": check HF_TOKEN's access");
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(r.body);
    } catch (const nlohmann::json::exception&) {
      throw Error(fmt::format("{}: the file list from {} is not JSON", ref.text, url));
    }
    if (!j.is_array()) throw Error(fmt::format("{}: the file list from {} is not a JSON array", ref.text, url));
    for (const auto& e : j) {
      if (!e.is_object() || e.value("type", "") != "file" || !e.contains("path") || !e["path"].is_string()) continue;
      HfEntry f;
      f.path = e["path"].get<std::string>();
      if (e.contains("size") && e["size"].is_number_unsigned()) f.size = e["size"].get<uint64_t>();
      if (e.contains("lfs") && e["lfs"].is_object()) {
        const auto& lfs = e["lfs"];
        if (lfs.contains("oid") && lfs["oid"].is_string()) f.sha256 = lower(lfs["oid"].get<std::string>());
        if (lfs.contains("size") && lfs["size"].is_number_unsigned()) f.size = lfs["size"].get<uint64_t>();
      }
      out.push_back(std::move(f));
    }
    url = next_link(r);
  }
  return out;
}

std::string file_name(const std::string& path) { return path.substr(path.rfind('/') + 1); }

std::string list_names(const std::vector<std::string>& files) {
  std::string s;
  for (const std::string& f : files) s += (s.empty() ? "" : ", ") + f;
  return s.empty() ? "(none)" : s;
}

}  // namespace

std::string pick_hf_file(const ModelRef& ref, const std::vector<std::string>& files) {
  std::vector<std::string> ggufs;
  for (const std::string& f : files)
    if (f.size() > 5 && lower(f).ends_with(".gguf")) ggufs.push_back(f);
  if (!ref.file.empty()) {
    if (std::find(files.begin(), files.end(), ref.file) == files.end())
      throw Error(fmt::format("{}: no file {} in the repository (its GGUF files: {})", ref.text, ref.file, list_names(ggufs)));
    return ref.file;
  }
  // Vision projectors sit beside the language model in many repositories.
  std::erase_if(ggufs, [](const std::string& f) { return lower(file_name(f)).starts_with("mmproj"); });
  std::vector<std::string> match;
  if (!ref.quant.empty()) {
    for (const std::string& f : ggufs)
      if (file_has_quant(file_name(f), ref.quant)) match.push_back(f);
  } else if (ggufs.size() == 1) {
    match = ggufs;
  } else {
    for (const std::string& f : ggufs)
      if (file_has_quant(file_name(f), "Q4_K_M")) match.push_back(f);
    if (match.empty())
      throw Error(fmt::format("{}: the repository has {} GGUF files; name one with :QUANT or /FILE.gguf ({})", ref.text,
                              ggufs.size(), list_names(ggufs)));
  }
  if (match.empty())
    throw Error(fmt::format("{}: no GGUF file for {} in the repository (its GGUF files: {})", ref.text, ref.quant,
                            list_names(ggufs)));
  static const std::regex split(R"(-(\d{5})-of-(\d{5})\.gguf$)", std::regex::icase);
  std::smatch m;
  if (std::regex_search(match.front(), m, split))
    throw Error(fmt::format("{}: {} is split into {} parts, which nexus does not load yet", ref.text, match.front(),
                            std::stoi(m[2].str())));
  if (match.size() > 1)
    throw Error(fmt::format("{}: several GGUF files match; name one with /FILE.gguf ({})", ref.text, list_names(match)));
  return match.front();
}

RemoteFile resolve_hf(const ModelRef& ref, const RegistryConfig& cfg) {
  std::vector<std::string> auth;
  if (!cfg.hf_token.empty()) auth.push_back("Authorization: Bearer " + cfg.hf_token);
  const std::vector<HfEntry> tree = list_tree(ref, cfg, auth);
  std::vector<std::string> paths;
  for (const HfEntry& e : tree) paths.push_back(e.path);
  const std::string path = pick_hf_file(ref, paths);
  const HfEntry& entry = *std::find_if(tree.begin(), tree.end(), [&](const HfEntry& e) { return e.path == path; });

  RemoteFile f;
  f.name = fmt::format("hf:{}/{}/{}", ref.owner, ref.repo, path);
  f.store_rel = fmt::format("hf/{}/{}/{}", ref.owner, ref.repo, path);
  f.url = fmt::format("{}/{}/{}/resolve/main/{}", cfg.hf_endpoint, ref.owner, ref.repo, path);
  f.headers = auth;
  f.size = entry.size;
  f.sha256 = entry.sha256;
  if (!is_sha256(f.sha256)) {
    // Not stored in LFS: the hub states the SHA-256 in the first answer's X-Linked-ETag.
    const HttpResponse head = http_fetch({f.url, auth, false, true});
    std::string etag = head.headers.count("x-linked-etag") ? head.headers.at("x-linked-etag") : "";
    std::erase(etag, '"');
    if (etag.starts_with("W/")) etag.erase(0, 2);
    f.sha256 = lower(etag);
  }
  if (!is_sha256(f.sha256))
    throw Error(fmt::format("{}: {} states no SHA-256 for {}, so the download could not be checked", ref.text,
                            url_host(cfg.hf_endpoint), path));
  return f;
}

}  // namespace nexus::store
