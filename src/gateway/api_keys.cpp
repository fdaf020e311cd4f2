#include "gateway/api_keys.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "server/request_priority.h"
#include "util/error.h"
#include "util/json_depth.h"

namespace nexus::gateway {

namespace {

using nlohmann::json;

bool valid_key(std::string_view k) {
  if (k.empty() || k.size() > 512) return false;
  for (char c : k)
    if (c <= ' ' || c > '~') return false;
  return true;
}

bool valid_tenant(std::string_view t) {
  if (t.empty() || t.size() > 128) return false;
  for (char c : t)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') return false;
  return true;
}

struct Builder {
  const std::string& source;
  ApiKeyTable table;

  void add(const std::string& where, const std::string& key, const std::string& tenant, TenantLimits limits) {
    if (!valid_key(key)) throw Error(where + ": the key must be one word of printable ASCII (1 to 512 characters)");
    if (!valid_tenant(tenant)) throw Error(where + ": tenant '" + tenant + "' is not [A-Za-z0-9_.-]+ (1 to 128)");
    if (table.keys.count(key)) throw Error(where + ": this key is listed twice");
    size_t index = table.tenants.size();
    for (size_t i = 0; i < table.tenants.size(); ++i)
      if (table.tenants[i].name == tenant) index = i;
    if (index == table.tenants.size()) {
      table.tenants.push_back(Tenant{tenant, limits});
    } else if (!(table.tenants[index].limits == limits)) {
      throw Error(where + ": tenant '" + tenant + "' is given other limits than by its earlier key");
    }
    table.keys.emplace(key, index);
  }
};

std::optional<double> positive(const std::string& where, const std::string& what, double v) {
  if (!std::isfinite(v) || v <= 0) throw Error(where + ": " + what + " must be a positive number");
  return v;
}

std::optional<double> limit_word(const std::string& where, const std::string& what, const std::string& word) {
  if (word == "-") return std::nullopt;
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(word, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != word.size()) throw Error(where + ": " + what + " '" + word + "' is not a number (or - for no limit)");
  return positive(where, what, v);
}

std::optional<int32_t> priority_cap(const std::string& where, const std::string& word) {
  std::optional<int32_t> cap = server::parse_priority_cap(word);
  if (!cap) throw Error(where + ": max_priority '" + word + "' is not " + server::kPriorityCapValues);
  return cap;
}

void parse_lines(std::string_view text, Builder& b) {
  std::istringstream in{std::string(text)};
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const std::string where = b.source + ":" + std::to_string(n);
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string s; words >> s;) w.push_back(s);
    if (w.empty()) continue;
    if (w.size() < 2 || w.size() > 5)
      throw Error(where + ": expected KEY TENANT [REQUESTS_PER_SECOND [TOKENS_PER_MINUTE [MAX_PRIORITY]]]");
    TenantLimits l;
    if (w.size() > 2) l.requests_per_second = limit_word(where, "requests_per_second", w[2]);
    if (w.size() > 3) l.tokens_per_minute = limit_word(where, "tokens_per_minute", w[3]);
    if (w.size() > 4 && w[4] != "-") l.max_priority = priority_cap(where, w[4]);
    b.add(where, w[0], w[1], l);
  }
}

std::optional<double> json_limit(const std::string& where, const json& e, const char* name) {
  const auto it = e.find(name);
  if (it == e.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) throw Error(where + ": \"" + name + "\" must be a number or null");
  return positive(where, std::string("\"") + name + "\"", it->get<double>());
}

void parse_json(std::string_view text, Builder& b) {
  const json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded()) throw Error(b.source + ": not valid JSON");
  const json* entries = &doc;
  if (doc.is_object()) {
    for (const auto& [k, v] : doc.items())
      if (k != "keys") throw Error(b.source + ": unknown field \"" + k + "\" (expected \"keys\")");
    if (!doc.contains("keys")) throw Error(b.source + ": expected {\"keys\": [...]}");
    entries = &doc["keys"];
  }
  if (!entries->is_array()) throw Error(b.source + ": \"keys\" must be an array");
  for (size_t i = 0; i < entries->size(); ++i) {
    const json& e = (*entries)[i];
    const std::string where = b.source + ": keys[" + std::to_string(i) + "]";
    if (!e.is_object()) throw Error(where + ": expected an object");
    for (const auto& [k, v] : e.items())
      if (k != "key" && k != "tenant" && k != "requests_per_second" && k != "tokens_per_minute" &&
          k != "max_priority")
        throw Error(where + ": unknown field \"" + k +
                    "\" (key, tenant, requests_per_second, tokens_per_minute, max_priority)");
    if (!e.contains("key") || !e["key"].is_string()) throw Error(where + ": \"key\" (a string) is required");
    if (!e.contains("tenant") || !e["tenant"].is_string()) throw Error(where + ": \"tenant\" (a string) is required");
    TenantLimits l;
    l.requests_per_second = json_limit(where, e, "requests_per_second");
    l.tokens_per_minute = json_limit(where, e, "tokens_per_minute");
    if (const auto p = e.find("max_priority"); p != e.end() && !p->is_null()) {
      if (!p->is_string() && !p->is_number_integer())
        throw Error(where + ": \"max_priority\" must be a string, an integer or null");
      l.max_priority = priority_cap(where, p->is_string() ? p->get<std::string>() : p->dump());
    }
    b.add(where, e["key"].get<std::string>(), e["tenant"].get<std::string>(), l);
  }
}

}  // namespace

std::optional<size_t> ApiKeyTable::find(std::string_view key) const {
  const auto it = keys.find(std::string(key));
  if (it == keys.end()) return std::nullopt;
  return it->second;
}

ApiKeyTable parse_api_keys(std::string_view text, const std::string& source) {
  Builder b{source, {}};
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && (text[first] == '{' || text[first] == '['))
    parse_json(text, b);
  else
    parse_lines(text, b);
  if (b.table.keys.empty()) throw Error(source + ": no API key in the file");
  return std::move(b.table);
}

std::optional<server::ApiError> priority_refusal(const Tenant& tenant, const nlohmann::ordered_json& doc) {
  if (!tenant.limits.max_priority) return std::nullopt;
  if (!doc.is_object()) return std::nullopt;
  const auto p = doc.find("priority");
  if (p == doc.end()) return std::nullopt;
  const std::optional<int32_t> asked = server::priority_value(*p);
  const int32_t cap = *tenant.limits.max_priority;
  if (!asked || *asked <= cap) return std::nullopt;
  return server::priority_above_cap(*asked, cap, "this API key");
}

ApiKeyTable load_api_keys(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("--api-keys: cannot read " + path);
  std::ostringstream s;
  s << f.rdbuf();
  return parse_api_keys(s.str(), path);
}

}  // namespace nexus::gateway
