#include "loadgen/bench.h"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "loadgen/progress.h"
#include "loadgen/ws_transport.h"
#include "util/error.h"

namespace nexus::loadgen {

namespace {

constexpr uint64_t kWarmupSessions = uint64_t{1} << 40;  // warmup session indices: disjoint from measured ones
// Each phase of a sweep draws its own sessions (prompts), so a server's
// prefix cache cannot serve a later phase what an earlier one computed.
constexpr uint64_t kPhaseSessions = uint64_t{1} << 32;

void say(const BenchOptions& o, const std::string& s) {
  if (o.log) o.log(s);
}

// Checks the server answers and picks the model id when none was given.
void preflight(BenchOptions& o) {
  HttpTransportOptions h = o.http;
  h.timeout = std::min(h.timeout, std::chrono::milliseconds(10'000));
  HttpTransport t(h);
  const HttpReply r = t.get("/v1/models");
  if (r.error == ErrorKind::Connect || r.error == ErrorKind::Connection) {
    throw Error(fmt::format("server not reachable: {}", r.error_message));
  }
  if (r.error == ErrorKind::Timeout) {
    throw Error(fmt::format("server at {} did not answer GET /v1/models within {} ms", h.server.to_string(),
                            h.timeout.count()));
  }
  if (!o.workload.model.empty()) return;
  const auto j = nlohmann::json::parse(r.body, nullptr, false);
  if (r.error == ErrorKind::None && j.is_object() && j.contains("data") && j["data"].is_array() &&
      !j["data"].empty() && j["data"][0].is_object() && j["data"][0].contains("id") && j["data"][0]["id"].is_string()) {
    o.workload.model = j["data"][0]["id"];
    say(o, "model: " + o.workload.model + " (from /v1/models)");
  } else {
    say(o, fmt::format("GET /v1/models gave HTTP {}: sending requests without \"model\"", r.status));
  }
}

std::string label_of(const LoadOptions& l) {
  return l.rate > 0 ? fmt::format("rate {:g} req/s", l.rate) : fmt::format("concurrency {}", l.concurrency);
}

BenchConfig config_of(const BenchOptions& o) {
  BenchConfig c;
  c.url = o.http.server.to_string();
  c.endpoint = api_name(o.workload.api);
  c.transport = o.websocket ? "ws" : o.http.keep_alive ? "http-keepalive" : "http";
  c.model = o.workload.model;
  c.mode = o.load.rate > 0 || !o.sweep_rate.empty() ? "open" : "closed";
  c.concurrency = o.load.concurrency;
  c.rate = o.load.rate;
  c.requests = o.load.sessions;
  c.duration_s = o.load.duration_s;
  c.turns = o.workload.turns;
  c.preamble_tokens = o.workload.preamble_words;
  c.warm_up = o.workload.warm_up;
  c.prompt_tokens = o.workload.prompt_tokens.spec();
  c.max_tokens = o.workload.max_tokens.spec();
  c.ignore_eos = o.workload.ignore_eos;
  c.prompts_file = o.prompts_file;
  c.seed = o.workload.seed;
  c.warmup = o.warmup;
  c.timeout_s = static_cast<double>(o.http.timeout.count()) / 1e3;
  c.price_per_hour = o.price_per_hour;
  c.sweep_concurrency = o.sweep_concurrency;
  c.sweep_rate = o.sweep_rate;
  return c;
}

}  // namespace

BenchReport run_bench(BenchOptions o) {
  if (!o.sweep_concurrency.empty() && !o.sweep_rate.empty()) {
    throw Error("--sweep-concurrency and --sweep-rate cannot be combined");
  }
  for (int32_t c : o.sweep_concurrency) {
    if (c < 1) throw Error(fmt::format("--sweep-concurrency: level {} must be >= 1", c));
  }
  for (double r : o.sweep_rate) {
    if (!(r > 0)) throw Error(fmt::format("--sweep-rate: level {} must be > 0", r));
  }
  if (o.price_per_hour && !(*o.price_per_hour >= 0)) throw Error("--price-per-hour must be >= 0");
  preflight(o);
  const Workload workload(o.workload);
  const TransportFactory transports = o.websocket ? ws_transport_factory(o.http) : http_transport_factory(o.http);

  if (o.warmup > 0) {
    LoadOptions w;
    w.concurrency = static_cast<int32_t>(std::min<uint64_t>(std::max(o.load.concurrency, 1), o.warmup));
    w.sessions = o.warmup;
    w.first_session = kWarmupSessions;
    ProgressBar bar(o.progress, "warmup", o.warmup * static_cast<uint64_t>(o.workload.turns), std::nullopt);
    const PhaseRun run = run_phase(workload, transports, w, [&](const RequestRecord& r) { bar.add(r.result.ok()); });
    const auto failed = std::count_if(run.records.begin(), run.records.end(),
                                      [](const RequestRecord& r) { return !r.result.ok(); });
    say(o, fmt::format("warmup: {} requests, {} failed", run.records.size(), failed));
  }

  std::vector<LoadOptions> levels;
  for (int32_t c : o.sweep_concurrency) {
    LoadOptions l = o.load;
    l.rate = 0;
    l.concurrency = c;
    levels.push_back(l);
  }
  for (double r : o.sweep_rate) {
    LoadOptions l = o.load;
    l.rate = r;
    levels.push_back(l);
  }
  if (levels.empty()) levels.push_back(o.load);

  BenchReport report;
  report.config = config_of(o);
  for (size_t i = 0; i < levels.size(); ++i) {
    LoadOptions& l = levels[i];
    l.first_session = i * kPhaseSessions;
    const std::string label = label_of(l);
    std::optional<uint64_t> total;
    if (l.sessions) total = *l.sessions * static_cast<uint64_t>(o.workload.turns);
    PhaseRun run;
    {
      ProgressBar bar(o.progress, label, total, l.duration_s);
      run = run_phase(workload, transports, l, [&](const RequestRecord& r) { bar.add(r.result.ok()); });
    }
    report.phases.push_back(analyze_phase(run, label, l.concurrency, l.rate, o.price_per_hour));
    const PhaseReport& p = report.phases.back();
    say(o, fmt::format("{}: {} completed, {} failed in {:.2f} s", label, p.completed, p.failed, p.duration_s));
  }
  return report;
}

}  // namespace nexus::loadgen
