// `nexus gateway`: one OpenAI-compatible endpoint over several `nexus serve`
// replicas (src/gateway/, docs/gateway.md). Prints "listening on
// http://HOST:PORT" on stdout once it accepts connections, one line per
// request on stderr. The first SIGINT/SIGTERM drains (new requests get 503,
// requests in flight finish, up to --drain-timeout); a second stops at once.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <pthread.h>

#include "cli/command.h"
#include "gateway/api_keys.h"
#include "gateway/dns_discovery.h"
#include "gateway/fault_injection.h"
#include "gateway/gateway_server.h"
#include "loadgen/url.h"
#include "util/error.h"
#include "util/json_depth.h"

namespace nexus::cli {
namespace {

using std::chrono::milliseconds;

struct GatewayArgs {
  std::string listen = "127.0.0.1:8090";
  std::vector<std::string> replicas, replicas_from;
  int64_t dns_interval = 5000;
  std::string policy = "least-load";
  std::vector<std::string> faults;
  std::string api_keys;
  double drain_timeout = 10;  // seconds
  int64_t load_interval = 50, health_interval = 500, probe_timeout = 500;
  int64_t breaker_cool_down = 1000, breaker_window = 10'000;
  int64_t connect_timeout = 1000, ttft_timeout = 30'000, stream_idle_timeout = 30'000;
  int64_t backoff_base = 5, backoff_max = 200;
  int max_json_depth = kDefaultMaxJsonDepth;  // util/json_depth.h
  gateway::GatewayOptions opts;
};

// Waits (signals blocked) until the gateway has nothing in flight, the drain
// timeout passes, or a second stop signal comes; returns what is left.
int32_t drain(gateway::GatewayServer& gw, const sigset_t& stop_signals, double timeout) {
  gw.drain();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout);
  for (;;) {
    const int32_t left = gw.in_flight();
    if (left == 0) return 0;
    if (std::chrono::steady_clock::now() >= deadline) return left;
    const timespec poll{0, 10'000'000};  // 10 ms
    if (sigtimedwait(&stop_signals, nullptr, &poll) > 0) return left;
  }
}

int run_gateway(GatewayArgs& a) {
  set_max_json_depth(a.max_json_depth);
  gateway::GatewayOptions& o = a.opts;
  const size_t colon = a.listen.rfind(':');
  if (colon == std::string::npos || colon == 0) throw UsageError("--listen: expected HOST:PORT, got '" + a.listen + "'");
  o.host = a.listen.substr(0, colon);
  int port = 0;
  bool oor = false;
  if (!parse_whole(a.listen.substr(colon + 1), port, oor).empty() || oor || port < 0 || port > 65535)
    throw UsageError("--listen: '" + a.listen.substr(colon + 1) + "' is not a port (0 to 65535)");
  o.port = static_cast<uint16_t>(port);
  if (a.replicas.empty() && a.replicas_from.empty())
    throw UsageError("--replica is required (or --replicas-from dns:NAME:PORT)");
  o.replicas = a.replicas;
  o.replicas_from = a.replicas_from;
  o.dns_interval = milliseconds(a.dns_interval);
  o.policy = *gateway::policy_from_name(a.policy);  // checked by the option
  for (const std::string& f : a.faults) o.faults.push_back(gateway::parse_fault(f));
  if (!a.api_keys.empty()) o.api_keys = gateway::load_api_keys(a.api_keys);
  o.health.load_interval = milliseconds(a.load_interval);
  o.health.health_interval = milliseconds(a.health_interval);
  o.health.probe_timeout = milliseconds(a.probe_timeout);
  o.breaker.cool_down = milliseconds(a.breaker_cool_down);
  o.breaker.window = milliseconds(a.breaker_window);
  o.connect_timeout = milliseconds(a.connect_timeout);
  o.ttft_timeout = milliseconds(a.ttft_timeout);
  o.stream_idle_timeout = milliseconds(a.stream_idle_timeout);
  o.retry.base_backoff = milliseconds(a.backoff_base);
  o.retry.max_backoff = milliseconds(a.backoff_max);
  o.log = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };

  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  std::signal(SIGPIPE, SIG_IGN);  // a replica or client gone mid-write is an error code, not a signal

  gateway::GatewayServer gw(o);
  gw.start();
  std::fprintf(stderr, "nexus gateway: %zu replica(s)%s, policy %s%s\n", o.replicas.size(),
               o.replicas_from.empty() ? "" : fmt::format(" + {} DNS source(s)", o.replicas_from.size()).c_str(),
               a.policy.c_str(),
               o.api_keys ? fmt::format(", {} API key(s) of {} tenant(s)", o.api_keys->keys.size(),
                                        o.api_keys->tenants.size()).c_str()
                          : "");
  std::printf("listening on %s://%s:%u\n", gw.tls() ? "https" : "http", gw.host().c_str(),
              static_cast<unsigned>(gw.port()));
  std::fflush(stdout);

  int sig = 0;
  sigwait(&stop_signals, &sig);
  std::fprintf(stderr, "nexus gateway: %s, draining (up to %.0f s; send it again to stop now)\n",
               sig == SIGINT ? "SIGINT" : "SIGTERM", a.drain_timeout);
  if (const int32_t left = drain(gw, stop_signals, a.drain_timeout); left > 0)
    std::fprintf(stderr, "nexus gateway: closing %d unfinished request(s)\n", left);
  std::fprintf(stderr, "nexus gateway: shutting down\n");
  gw.stop();
  return 0;
}

std::function<int()> setup(CLI::App& sub) {
  auto a = std::make_shared<GatewayArgs>();
  gateway::GatewayOptions& o = a->opts;
  sub.add_option("--listen", a->listen, "HOST:PORT to listen on (port 0 = any free port, printed at startup)")
      ->capture_default_str();
  sub.add_option("--replica", a->replicas,
                 "a `nexus serve` replica's URL (http://host:port); repeat for each (or use --replicas-from)")
      ->check(CLI::Validator(
          [](std::string& u) -> std::string {
            try {
              loadgen::parse_server_url(u);
            } catch (const Error&) {
              return "'" + u + "' is not a replica URL: expected http://HOST[:PORT][/PATH]";
            }
            return {};
          },
          "URL"));
  sub.add_option("--replicas-from", a->replicas_from,
                 "dns:NAME:PORT: every address NAME resolves to is a replica http://ADDRESS:PORT, re-resolved every "
                 "--dns-interval-ms (a Kubernetes headless Service's pods); repeatable")
      ->check(CLI::Validator(
          [](std::string& spec) -> std::string {
            try {
              gateway::parse_dns_source(spec);
            } catch (const Error& e) {
              return e.what();
            }
            return {};
          },
          "dns:NAME:PORT"));
  sub.add_option("--dns-interval-ms", a->dns_interval, "--replicas-from re-resolution interval")
      ->capture_default_str()
      ->check(range<int64_t>(10, 3'600'000));
  sub.add_option("--policy", a->policy, "routing: least-load (power of two choices), prefix, round-robin")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& p) -> std::string {
            return gateway::policy_from_name(p) ? "" : "unknown policy '" + p + "' (least-load, prefix, round-robin)";
          },
          ""));
  sub.add_option("--prefix-threshold", o.prefix_threshold,
                 "prefix policy: load-score excess (about requests) over the least-loaded replica above which "
                 "affinity is overridden")
      ->capture_default_str()
      ->check(at_least(0.0));
  sub.add_option("--api-keys", a->api_keys,
                 "file of API keys with their tenants and limits (JSON or `KEY TENANT [REQ/S [TOKENS/MIN]]` lines; "
                 "docs/gateway.md): requests need `Authorization: Bearer KEY` (or Anthropic's `x-api-key: KEY`)")
      ->check(CLI::ExistingFile);
  add_cors_option(sub, o.cors_allow_origins);
  sub.add_option("--replica-api-key", o.replica_api_key,
                 "key sent to the replicas as `Authorization: Bearer KEY` (for `nexus serve --api-key`)")
      ->check(CLI::Validator(
          [](std::string& k) {
            return !k.empty() && k.find_first_of(" \t\r\n") == std::string::npos
                       ? std::string()
                       : std::string("an API key is one non-empty word (no spaces)");
          },
          "KEY"));
  auto* cert = sub.add_option("--tls-cert", o.tls_cert, "PEM certificate (chain) file: serve HTTPS (with --tls-key)")
                   ->check(CLI::ExistingFile);
  auto* key = sub.add_option("--tls-key", o.tls_key, "PEM private key file of --tls-cert")->check(CLI::ExistingFile);
  cert->needs(key);
  key->needs(cert);
  sub.add_option("--io-threads", o.io_threads, "I/O threads (1 adds the least latency; raise it when the gateway saturates a core)")->capture_default_str()->check(range(1, 64));
  sub.add_option("--fault", a->faults, "inject faults: abort=PCT:STATUS or delay=PCT:MS, optionally @URL (one replica)")
      ->check(parses_with([](const std::string& f) { gateway::parse_fault(f); }, "FAULT"));
  sub.add_option("--load-interval-ms", a->load_interval, "GET /load poll interval per replica")
      ->capture_default_str()
      ->check(range<int64_t>(1, 100));
  sub.add_option("--health-interval-ms", a->health_interval, "GET /health interval per replica")
      ->capture_default_str()
      ->check(range<int64_t>(1, 600'000));
  sub.add_option("--probe-timeout-ms", a->probe_timeout, "health/load probe timeout")
      ->capture_default_str()
      ->check(range<int64_t>(1, 600'000));
  sub.add_option("--breaker-failures", o.breaker.failure_threshold, "failures within the window that open a breaker")
      ->capture_default_str()
      ->check(range(1, 1'000'000));
  sub.add_option("--breaker-window-ms", a->breaker_window, "breaker failure window")
      ->capture_default_str()
      ->check(range<int64_t>(1, 3'600'000));
  sub.add_option("--breaker-cooldown-ms", a->breaker_cool_down, "open breaker's wait before half-open probes")
      ->capture_default_str()
      ->check(range<int64_t>(1, 3'600'000));
  sub.add_option("--breaker-probes", o.breaker.half_open_probes, "requests let through at once while half-open")
      ->capture_default_str()
      ->check(range(1, 1000));
  sub.add_option("--max-attempts", o.retry.max_attempts, "attempts per request, the first included")
      ->capture_default_str()
      ->check(range(1, 16));
  sub.add_option("--retry-budget", o.retry.budget_ratio, "retries allowed as a share of requests over the last 10 s")
      ->capture_default_str()
      ->check(range(0.0, 10.0));
  sub.add_option("--retry-min", o.retry.min_retries, "retries always allowed per 10 s, on top of the share")
      ->capture_default_str()
      ->check(range(0, 1'000'000));
  sub.add_option("--backoff-base-ms", a->backoff_base, "first retry's backoff cap (doubling, full jitter)")
      ->capture_default_str()
      ->check(range<int64_t>(0, 60'000));
  sub.add_option("--backoff-max-ms", a->backoff_max, "backoff cap")->capture_default_str()->check(range<int64_t>(0, 60'000));
  sub.add_option("--connect-timeout-ms", a->connect_timeout, "connect timeout to a replica")
      ->capture_default_str()
      ->check(range<int64_t>(1, 600'000));
  sub.add_option("--ttft-timeout-ms", a->ttft_timeout,
                 "an attempt with no first response byte by then moves to another replica")
      ->capture_default_str()
      ->check(range<int64_t>(1, 3'600'000));
  sub.add_option("--stream-idle-timeout-ms", a->stream_idle_timeout,
                 "a started stream silent this long ends with an error event")
      ->capture_default_str()
      ->check(range<int64_t>(1, 3'600'000));
  sub.add_option("--max-json-depth", a->max_json_depth,
                 "deepest nesting of arrays and objects the gateway reads in a JSON body, realtime event or replica "
                 "event; a body it must read (--policy prefix, a stream under --api-keys) nested deeper is 400 "
                 "nesting_too_deep")
      ->capture_default_str()
      ->check(range(1, kMaxJsonDepthLimit));
  sub.add_option("--drain-timeout", a->drain_timeout, "seconds a stop signal waits for requests in flight")
      ->capture_default_str()
      ->check(range(0.0, 3600.0));
  return [a] { return run_gateway(*a); };
}

const CommandRegistrar reg{{"gateway", "route the OpenAI-compatible API over several `nexus serve` replicas", setup}};

}  // namespace
}  // namespace nexus::cli
