#include "loadgen/report_json.h"

namespace nexus::loadgen {

using nlohmann::json;

namespace {

template <class T>
json opt(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

json request_json(const RequestMetrics& m) {
  return {{"session", m.session},
          {"turn", m.turn + 1},
          {"ok", m.ok},
          {"error", m.ok ? json(nullptr) : json(m.error)},
          {"error_message", m.ok ? json(nullptr) : json(m.error_message)},
          {"http_status", m.http_status},
          {"start_s", m.start_s},
          {"start_delay_ms", m.start_delay_ms},
          {"connect_ms", m.connect_ms},
          {"reused_connection", m.reused_connection},
          {"ttft_ms", opt(m.ttft_ms)},
          {"e2e_ms", m.e2e_ms},
          {"tpot_ms", opt(m.tpot_ms)},
          {"chunk_times_ms", m.chunk_times_ms},
          {"max_tokens", m.max_tokens},
          {"prompt_tokens", opt(m.prompt_tokens)},
          {"completion_tokens", opt(m.completion_tokens)},
          {"cached_tokens", opt(m.cached_tokens)},
          {"server_ttft_ms", opt(m.server_ttft_ms)}};
}

json phase_json(const PhaseReport& p) {
  json turns = json::array();
  for (const TurnSummary& t : p.ttft_by_turn)
    turns.push_back({{"turn", t.turn + 1},
                     {"ttft_ms", summary_json(t.ttft_ms)},
                     {"prompt_tokens_mean", t.prompt_tokens},
                     {"cached_tokens_mean", t.cached_tokens}});
  json details = json::array();
  for (const RequestMetrics& m : p.requests_detail) details.push_back(request_json(m));
  json errors = json::object();
  for (const auto& [k, n] : p.errors) errors[k] = n;
  json examples = json::object();
  for (const auto& [k, msg] : p.error_examples) examples[k] = msg;
  return {{"label", p.label},
          {"mode", p.rate > 0 ? "open" : "closed"},
          {"concurrency", p.concurrency},
          {"rate", p.rate},
          {"duration_s", p.duration_s},
          {"sessions", p.sessions},
          {"requests", p.requests},
          {"completed", p.completed},
          {"failed", p.failed},
          {"errors", errors},
          {"error_examples", examples},
          {"prompt_tokens", p.prompt_tokens},
          {"completion_tokens", p.completion_tokens},
          {"cached_tokens", p.cached_tokens},
          {"usage_missing", p.usage_missing},
          {"text_chunks", p.text_chunks},
          {"connections_opened", p.connections_opened},
          {"request_throughput", p.request_throughput},
          {"output_token_throughput", p.output_token_throughput},
          {"total_token_throughput", p.total_token_throughput},
          {"cost_per_million_output_tokens", opt(p.cost_per_million_output_tokens)},
          {"ttft_ms", summary_json(p.ttft_ms)},
          {"itl_ms", summary_json(p.itl_ms)},
          {"tpot_ms", summary_json(p.tpot_ms)},
          {"e2e_ms", summary_json(p.e2e_ms)},
          {"ttft_by_turn", turns},
          {"request_details", details}};
}

}  // namespace

json summary_json(const Summary& s) {
  return {{"count", s.count}, {"mean", s.mean}, {"min", s.min}, {"max", s.max},
          {"p50", s.p50},     {"p90", s.p90},   {"p99", s.p99}};
}

json report_json(const BenchReport& r) {
  const BenchConfig& c = r.config;
  json config = {{"url", c.url},
                 {"endpoint", c.endpoint},
                 {"transport", c.transport},
                 {"model", c.model.empty() ? json(nullptr) : json(c.model)},
                 {"mode", c.mode},
                 {"concurrency", c.concurrency},
                 {"rate", c.rate},
                 {"requests", opt(c.requests)},
                 {"duration_s", opt(c.duration_s)},
                 {"turns", c.turns},
                 {"preamble_tokens", c.preamble_tokens},
                 {"warm_up", c.warm_up},
                 {"prompt_tokens", c.prompt_tokens},
                 {"max_tokens", c.max_tokens},
                 {"ignore_eos", c.ignore_eos},
                 {"prompts_file", c.prompts_file.empty() ? json(nullptr) : json(c.prompts_file)},
                 {"seed", c.seed},
                 {"warmup", c.warmup},
                 {"timeout_s", c.timeout_s},
                 {"price_per_hour", opt(c.price_per_hour)},
                 {"sweep_concurrency", c.sweep_concurrency},
                 {"sweep_rate", c.sweep_rate}};
  json phases = json::array();
  for (const PhaseReport& p : r.phases) phases.push_back(phase_json(p));
  return {{"schema", "nexus-bench/1"}, {"config", config}, {"phases", phases}};
}

}  // namespace nexus::loadgen
