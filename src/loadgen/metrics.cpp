#include "loadgen/metrics.h"

#include <algorithm>

namespace nexus::loadgen {

namespace {

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

}  // namespace

RequestMetrics request_metrics(const RequestRecord& rec, Clock::time_point phase_start) {
  const RequestResult& r = rec.result;
  RequestMetrics m;
  m.session = rec.session;
  m.turn = rec.turn;
  m.ok = r.ok();
  m.error = r.error_key();
  m.error_message = r.error_message;
  m.http_status = r.http_status;
  m.start_s = ms(r.start - phase_start) / 1e3;
  m.start_delay_ms = std::max(0.0, ms(r.start - rec.scheduled));
  m.connect_ms = r.connect_ms;
  m.reused_connection = r.reused_connection;
  m.e2e_ms = ms(r.end - r.start);
  for (const auto& t : r.token_times) m.chunk_times_ms.push_back(ms(t - r.start));
  if (!m.chunk_times_ms.empty()) m.ttft_ms = m.chunk_times_ms.front();
  m.max_tokens = rec.max_tokens;
  m.prompt_tokens = r.prompt_tokens;
  m.completion_tokens = r.completion_tokens;
  m.cached_tokens = r.cached_tokens;
  m.server_ttft_ms = r.server_ttft_ms;
  const int64_t n = r.completion_tokens.value_or(static_cast<int64_t>(r.token_times.size()));
  if (m.ok && m.ttft_ms && n > 1) m.tpot_ms = (m.e2e_ms - *m.ttft_ms) / static_cast<double>(n - 1);
  return m;
}

std::optional<double> cost_per_million_tokens(double price_per_hour, double tokens_per_s) {
  if (!(tokens_per_s > 0)) return std::nullopt;
  return price_per_hour / (tokens_per_s * 3600.0) * 1e6;
}

PhaseReport analyze_phase(const PhaseRun& run, const std::string& label, int32_t concurrency, double rate,
                          std::optional<double> price_per_hour) {
  PhaseReport p;
  p.label = label;
  p.concurrency = rate > 0 ? 0 : concurrency;
  p.rate = rate;
  p.duration_s = ms(run.end - run.start) / 1e3;
  p.sessions = run.sessions;
  p.connections_opened = run.connections_opened;
  std::vector<double> ttft, itl, tpot, e2e;
  std::map<int32_t, std::vector<double>> ttft_turn;
  struct TokenSums {
    int64_t prompt = 0, cached = 0, n = 0;
  };
  std::map<int32_t, TokenSums> tokens_turn;
  for (const RequestRecord& rec : run.records) {
    RequestMetrics m = request_metrics(rec, run.start);
    ++p.requests;
    if (!m.ok) {
      ++p.failed;
      ++p.errors[m.error];
      p.error_examples.emplace(m.error, m.error_message);
    } else {
      ++p.completed;
      p.text_chunks += m.chunk_times_ms.size();
      if (m.completion_tokens) {
        p.completion_tokens += *m.completion_tokens;
        p.prompt_tokens += m.prompt_tokens.value_or(0);
        p.cached_tokens += m.cached_tokens.value_or(0);
      } else {
        ++p.usage_missing;
        p.completion_tokens += static_cast<int64_t>(m.chunk_times_ms.size());
      }
      e2e.push_back(m.e2e_ms);
      if (m.ttft_ms) {
        ttft.push_back(*m.ttft_ms);
        ttft_turn[m.turn].push_back(*m.ttft_ms);
      }
      if (m.prompt_tokens) {
        TokenSums& t = tokens_turn[m.turn];
        t.prompt += *m.prompt_tokens;
        t.cached += m.cached_tokens.value_or(0);
        ++t.n;
      }
      if (m.tpot_ms) tpot.push_back(*m.tpot_ms);
      for (size_t i = 1; i < m.chunk_times_ms.size(); ++i) {
        itl.push_back(m.chunk_times_ms[i] - m.chunk_times_ms[i - 1]);
      }
    }
    p.requests_detail.push_back(std::move(m));
  }
  std::sort(p.requests_detail.begin(), p.requests_detail.end(), [](const RequestMetrics& a, const RequestMetrics& b) {
    return a.session != b.session ? a.session < b.session : a.turn < b.turn;
  });
  p.ttft_ms = summarize(std::move(ttft));
  p.itl_ms = summarize(std::move(itl));
  p.tpot_ms = summarize(std::move(tpot));
  p.e2e_ms = summarize(std::move(e2e));
  for (auto& [turn, v] : ttft_turn) {
    TurnSummary t{turn, summarize(std::move(v))};
    if (const auto it = tokens_turn.find(turn); it != tokens_turn.end() && it->second.n > 0) {
      t.prompt_tokens = static_cast<double>(it->second.prompt) / static_cast<double>(it->second.n);
      t.cached_tokens = static_cast<double>(it->second.cached) / static_cast<double>(it->second.n);
    }
    p.ttft_by_turn.push_back(t);
  }
  if (p.duration_s > 0) {
    p.request_throughput = static_cast<double>(p.completed) / p.duration_s;
    p.output_token_throughput = static_cast<double>(p.completion_tokens) / p.duration_s;
    p.total_token_throughput = static_cast<double>(p.prompt_tokens + p.completion_tokens) / p.duration_s;
  }
  if (price_per_hour) p.cost_per_million_output_tokens = cost_per_million_tokens(*price_per_hour, p.output_token_throughput);
  return p;
}

}  // namespace nexus::loadgen
