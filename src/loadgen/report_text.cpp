#include "loadgen/report_text.h"

#include <fmt/format.h>

namespace nexus::loadgen {

namespace {

std::string row(const char* name, const Summary& s) {
  if (s.count == 0) return fmt::format("  {:<6} {:>10}\n", name, "-");
  return fmt::format("  {:<6} {:>10.2f} {:>10.2f} {:>10.2f} {:>10.2f} {:>10.2f} {:>10.2f} {:>8}\n", name, s.mean,
                     s.min, s.p50, s.p90, s.p99, s.max, s.count);
}

void phase_text(std::string& out, const BenchReport& r, const PhaseReport& p) {
  out += fmt::format("== {} ==\n", p.label);
  out += fmt::format("requests    {} completed, {} failed ({} sessions) in {:.3f} s\n", p.completed, p.failed,
                     p.sessions, p.duration_s);
  out += fmt::format("throughput  {:.2f} req/s, {:.1f} output tok/s, {:.1f} total tok/s\n", p.request_throughput,
                     p.output_token_throughput, p.total_token_throughput);
  out += fmt::format("tokens      prompt {} ({} cached), completion {} (server usage{}), text chunks {}, connections {}\n",
                     p.prompt_tokens, p.cached_tokens, p.completion_tokens,
                     p.usage_missing ? fmt::format("; {} requests without it", p.usage_missing) : "", p.text_chunks,
                     p.connections_opened);
  if (r.config.price_per_hour) {
    out += p.cost_per_million_output_tokens
               ? fmt::format("cost        ${:.4f} per million output tokens (at ${:.2f}/hour)\n",
                             *p.cost_per_million_output_tokens, *r.config.price_per_hour)
               : std::string("cost        - (no output tokens)\n");
  }
  for (const auto& [key, n] : p.errors) {
    const auto ex = p.error_examples.find(key);
    out += fmt::format("error       {} x{}: {}\n", key, n, ex == p.error_examples.end() ? "" : ex->second);
  }
  out += fmt::format("  {:<6} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8}\n", "ms", "mean", "min", "p50", "p90",
                     "p99", "max", "n");
  out += row("TTFT", p.ttft_ms);
  out += row("ITL", p.itl_ms);
  out += row("TPOT", p.tpot_ms);
  out += row("E2E", p.e2e_ms);
  if (p.ttft_by_turn.size() > 1) {
    out += "  TTFT by turn (ms); prompt tokens (mean): prefilled + cached:\n";
    for (const TurnSummary& t : p.ttft_by_turn) {
      out += fmt::format("    turn {:<3} p50 {:>9.2f}  p90 {:>9.2f}  p99 {:>9.2f}  mean {:>9.2f}  n {:<4}  prompt {:.0f} + {:.0f}\n",
                         t.turn + 1, t.ttft_ms.p50, t.ttft_ms.p90, t.ttft_ms.p99, t.ttft_ms.mean, t.ttft_ms.count,
                         t.prompt_tokens - t.cached_tokens, t.cached_tokens);
    }
  }
}

}  // namespace

std::string report_text(const BenchReport& r) {
  const BenchConfig& c = r.config;
  std::string out = fmt::format("nexus bench: {} /v1/{}, transport {}, model {}\n", c.url,
                                c.endpoint == "chat" ? "chat/completions" : c.endpoint, c.transport,
                                c.model.empty() ? "(none sent)" : c.model);
  out += fmt::format("prompt words {}, max tokens {}{}, turns {}, seed {}, warmup {}\n", c.prompt_tokens,
                     c.max_tokens, c.ignore_eos ? " (ignore_eos)" : "", c.turns, c.seed, c.warmup);
  if (c.preamble_tokens > 0)
    out += fmt::format("preamble {} words (one system message, the same in every session){}\n", c.preamble_tokens,
                       c.warm_up ? ", prefilled by a generate:false warm-up before turn 1" : "");
  for (const PhaseReport& p : r.phases) {
    out += '\n';
    phase_text(out, r, p);
  }
  if (r.phases.size() > 1) {
    out += "\n== sweep (ms) ==\n";
    out += fmt::format("  {:<16} {:>8} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>6}\n", "load", "req/s",
                       "out tok/s", "TTFT p50", "TTFT p99", "ITL p50", "ITL p99", "E2E p50", "E2E p99", "errors");
    for (const PhaseReport& p : r.phases) {
      out += fmt::format("  {:<16} {:>8.2f} {:>10.1f} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f} {:>6}\n",
                         p.label, p.request_throughput, p.output_token_throughput, p.ttft_ms.p50, p.ttft_ms.p99,
                         p.itl_ms.p50, p.itl_ms.p99, p.e2e_ms.p50, p.e2e_ms.p99, p.failed);
    }
  }
  return out;
}

}  // namespace nexus::loadgen
