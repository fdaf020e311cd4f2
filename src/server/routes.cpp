#include "server/routes.h"

#include <array>

namespace nexus::server {

namespace {

constexpr Protocol kOpenAI = Protocol::OpenAI, kAnthropic = Protocol::Anthropic;

// First match wins: an {id} route with a suffix comes before the same
// prefix without one.
constexpr std::array<Route, 18> kRoutes = {{
    // id                          path                   suffix           v1     methods              protocol    open   ws     gen
    {RouteId::Completions,         "/completions",        "",              true,  "POST",              kOpenAI,    false, false, true},
    {RouteId::ChatCompletions,     "/chat/completions",   "",              true,  "POST",              kOpenAI,    false, false, true},
    {RouteId::Responses,           "/responses",          "",              true,  "POST",              kOpenAI,    false, true,  true},
    {RouteId::ResponseCancel,      "/responses/",         "/cancel",       true,  "POST",              kOpenAI,    false, false, false},
    {RouteId::ResponseInputItems,  "/responses/",         "/input_items",  true,  "GET, HEAD",         kOpenAI,    false, false, false},
    {RouteId::StoredResponse,      "/responses/",         "/",             true,  "GET, HEAD, DELETE", kOpenAI,    false, false, false},
    {RouteId::Messages,            "/messages",           "",              true,  "POST",              kAnthropic, false, false, true},
    {RouteId::CountTokens,         "/messages/count_tokens", "",           true,  "POST",              kAnthropic, false, false, false},
    {RouteId::Embeddings,          "/embeddings",         "",              true,  "POST",              kOpenAI,    false, false, false},
    {RouteId::Models,              "/models",             "",              true,  "GET, HEAD",         kOpenAI,    false, false, false},
    {RouteId::Model,               "/models/",            "/",             true,  "GET, HEAD",         kOpenAI,    false, false, false},
    {RouteId::Realtime,            "/realtime",           "",              true,  "GET",               kOpenAI,    false, true,  false},
    {RouteId::StatsStream,         "/stats/stream",       "",              true,  "GET",               kOpenAI,    false, false, false},
    {RouteId::Tokenize,            "/tokenize",           "",              false, "POST",              kOpenAI,    false, false, false},
    {RouteId::Detokenize,          "/detokenize",         "",              false, "POST",              kOpenAI,    false, false, false},
    {RouteId::Health,              "/health",             "",              false, "GET, HEAD",         kOpenAI,    true,  false, false},
    {RouteId::Metrics,             "/metrics",            "",              false, "GET, HEAD",         kOpenAI,    true,  false, false},
    {RouteId::Load,                "/load",               "",              false, "GET, HEAD",         kOpenAI,    true,  false, false},
}};

// `path` matches `r`: exactly, or as its prefix + a non-empty {id} + its
// suffix. A suffix of "/" stands for "anything after the id, or nothing"
// (a stored response's id, a model id that may hold '/').
bool matches(const Route& r, std::string_view path) {
  if (r.suffix.empty()) return path == r.path;
  if (!path.starts_with(r.path) || path.size() == r.path.size()) return false;
  const std::string_view rest = path.substr(r.path.size());
  if (r.suffix == "/") return true;
  return rest.size() > r.suffix.size() && rest.ends_with(r.suffix);
}

}  // namespace

std::string_view target_path(std::string_view target) { return target.substr(0, target.find('?')); }

const Route* find_route(std::string_view target) {
  const std::string_view path = target_path(target);
  const std::string_view under_v1 = path.starts_with("/v1/") ? path.substr(3) : std::string_view();
  for (const Route& r : kRoutes) {
    if (matches(r, path)) return &r;  // /tokenize, /health, ..., or a v1 route without /v1
    if (r.v1 && !under_v1.empty() && matches(r, under_v1)) return &r;
  }
  return nullptr;
}

}  // namespace nexus::server
