// ProxySession's access layer (proxy_session.h): the API key, the tenant's
// limits (tenant_limiter.h) and its usage (stream_usage.h).
#include <fmt/format.h>

#include "assets/web_assets.h"
#include "gateway/proxy_http.h"
#include "gateway/proxy_session.h"
#include "server/api_key.h"
#include "server/core/protocol.h"
#include "server/routes.h"

namespace nexus::gateway {

namespace http = boost::beast::http;

bool ProxySession::admit_request() {
  release_tenant();  // (a realtime session's, answered without an upgrade)
  tenant_.reset();
  usage_tap_.reset();
  // A CORS preflight carries no credentials; the replica answers it.
  if (req_.method() == http::verb::options) return true;
  const std::string_view target(req_.target().data(), req_.target().size());
  const std::string_view path = target.substr(0, target.find('?'));
  // The web chat's static files are public (server/api_key.h): relayed
  // without a tenant.
  if ((req_.method() == http::verb::get || req_.method() == http::verb::head) && find_web_asset(path)) return true;
  // A browser's realtime session presents its key as a subprotocol
  // (server/api_key.h); the limiter reads a bearer credential.
  const auto auth = req_[http::field::authorization];
  const auto protocols = req_[http::field::sec_websocket_protocol];
  const auto x_api_key = req_["x-api-key"];  // Anthropic's clients (Claude Code)
  const auto key = server::presented_key(std::string_view(auth.data(), auth.size()),
                                         std::string_view(protocols.data(), protocols.size()),
                                         std::string_view(x_api_key.data(), x_api_key.size()));
  const std::string credential = key ? "Bearer " + std::string(*key) : std::string(auth.data(), auth.size());
  const AccessVerdict v = ctx_.limiter->admit(credential, received_);
  if (v.result == AccessResult::Unauthorized) {
    ctx_.metrics.unauthorized().inc();
    // In the path's error shape (Anthropic's on /v1/messages, where the key goes in x-api-key).
    const server::Protocol protocol = server::protocol_of(path);
    respond(401, server::error_body(protocol, server::invalid_api_key(v.key_presented, protocol)),
            "application/json", "WWW-Authenticate: Bearer\r\n");
    return false;
  }
  GatewayMetrics::PerTenant& m = ctx_.metrics.tenant(v.tenant);
  if (v.result != AccessResult::Admitted) {
    (v.result == AccessResult::RequestsLimited ? m.limited_requests : m.limited_tokens)->inc();
    respond(429, rate_limit_body(ctx_.limiter->tenants()[v.tenant], v.result, v.retry_after_seconds),
            "application/json", fmt::format("Retry-After: {}\r\n", v.retry_after_seconds));
    return false;
  }
  // The tenant's priority cap, before any replica sees the request (after
  // its bucket: a stream of refused requests is rate limited too), on every
  // generation path (server/routes.h), in the path's error shape.
  const server::Route* route = server::find_route(path);
  const bool generation = req_.method() == http::verb::post && route && route->generation;
  const Tenant& tenant = ctx_.limiter->tenants()[v.tenant];
  if (const auto refusal = generation && tenant.limits.max_priority ? priority_refusal(tenant, body_json())
                                                                    : std::nullopt) {
    respond(400, server::error_body(route->protocol, *refusal));
    return false;
  }
  tenant_ = v.tenant;
  m.admitted->inc();
  m.in_flight->add(1);
  tenant_in_flight_ = true;
  // A stream's tokens come in its usage chunk: chat and completions ask the
  // replica for it; the agent protocols' streams always end with their usage.
  if (generation) {
    if (route->id == server::RouteId::Completions || route->id == server::RouteId::ChatCompletions) {
      if (auto r = with_stream_usage(body_json())) {
        req_.body() = std::move(r->body);
        req_.prepare_payload();
        usage_tap_.emplace(!r->client_asked);
      }
    } else {
      const auto& doc = body_json();
      const auto s = doc.is_object() ? doc.find("stream") : doc.end();
      if (s != doc.end() && s->is_boolean() && s->get<bool>()) usage_tap_.emplace(/*strip=*/false);
    }
  }
  return true;
}

void ProxySession::charge_usage(const std::optional<TokenUsage>& usage) {
  if (!tenant_ || !usage) return;
  ctx_.limiter->charge(*tenant_, *usage, std::chrono::steady_clock::now());
  GatewayMetrics::PerTenant& m = ctx_.metrics.tenant(*tenant_);
  m.prompt_tokens->inc(usage->prompt_tokens);
  m.completion_tokens->inc(usage->completion_tokens);
}

void ProxySession::release_tenant() {
  if (!tenant_in_flight_) return;
  tenant_in_flight_ = false;
  ctx_.metrics.tenant(*tenant_).in_flight->add(-1);
}

}  // namespace nexus::gateway
