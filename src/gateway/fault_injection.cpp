#include "gateway/fault_injection.h"

#include <charconv>

#include "loadgen/url.h"
#include "util/error.h"

namespace nexus::gateway {

namespace {

template <class T>
T parse_number(const std::string& text, const std::string& spec, const char* what) {
  T v{};
  const auto [at, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || at != text.data() + text.size() || text.empty())
    throw Error("--fault " + spec + ": '" + text + "' is not " + what);
  return v;
}

}  // namespace

FaultRule parse_fault(const std::string& spec) {
  FaultRule r;
  std::string body = spec;
  if (const size_t at = body.find('@'); at != std::string::npos) {
    r.replica = loadgen::parse_server_url(body.substr(at + 1)).to_string();
    body = body.substr(0, at);
  }
  const size_t eq = body.find('=');
  const size_t colon = body.find(':', eq == std::string::npos ? 0 : eq);
  if (eq == std::string::npos || colon == std::string::npos)
    throw Error("--fault " + spec + ": expected abort=PCT:STATUS or delay=PCT:MS (optionally @URL)");
  const std::string kind = body.substr(0, eq);
  r.percent = parse_number<double>(body.substr(eq + 1, colon - eq - 1), spec, "a percentage");
  if (!(r.percent >= 0 && r.percent <= 100)) throw Error("--fault " + spec + ": the percentage must be 0 to 100");
  const std::string value = body.substr(colon + 1);
  if (kind == "abort") {
    r.kind = FaultRule::Kind::Abort;
    r.status = parse_number<int>(value, spec, "an HTTP status");
    if (r.status < 400 || r.status > 599) throw Error("--fault " + spec + ": the status must be 400 to 599");
  } else if (kind == "delay") {
    r.kind = FaultRule::Kind::Delay;
    const int64_t ms = parse_number<int64_t>(value, spec, "a number of milliseconds");
    if (ms < 0 || ms > 3'600'000) throw Error("--fault " + spec + ": the delay must be 0 to 3600000 ms");
    r.delay = std::chrono::milliseconds(ms);
  } else {
    throw Error("--fault " + spec + ": unknown fault '" + kind + "' (use abort or delay)");
  }
  return r;
}

FaultDecision decide_faults(const std::vector<FaultRule>& rules, const std::string& replica_url, std::mt19937_64& rng) {
  FaultDecision d;
  std::uniform_real_distribution<double> pct(0.0, 100.0);
  for (const FaultRule& r : rules) {
    if (!r.replica.empty() && r.replica != replica_url) continue;
    if (!(pct(rng) < r.percent)) continue;
    if (r.kind == FaultRule::Kind::Abort && !d.abort_status) d.abort_status = r.status;
    if (r.kind == FaultRule::Kind::Delay) d.delay += r.delay;
  }
  return d;
}

}  // namespace nexus::gateway
