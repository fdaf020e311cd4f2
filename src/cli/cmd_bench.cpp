// `nexus bench`: load generator and latency benchmark for Nexus or any
// OpenAI-compatible server (src/loadgen/, docs/bench.md). Prints a table to
// stdout (stderr when --json - takes stdout), optionally writes JSON and an
// SVG sweep chart. Exit status: 0 all requests completed, 3 some failed
// (the report is still written), 2 a usage error (a bad flag or value), 1
// another fatal error (server unreachable).
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/seed_arg.h"
#include "loadgen/bench.h"
#include "loadgen/distribution.h"
#include "loadgen/report_json.h"
#include "loadgen/report_text.h"
#include "loadgen/svg_chart.h"
#include "loadgen/tls_client.h"
#include "loadgen/url.h"
#include "loadgen/workload.h"
#include "util/error.h"

namespace nexus::cli {
namespace {

using namespace nexus::loadgen;

struct BenchCliArgs {
  std::string url = "http://127.0.0.1:8080";
  std::string endpoint = "completions";
  std::string transport = "http-keepalive";
  std::string model, api_key, extra_body;
  bool insecure = false;
  std::string cacert;
  int32_t concurrency = 1;
  double rate = 0;
  uint64_t requests = 0;
  double duration_s = 0;
  int32_t max_inflight = 1024;
  std::string prompt_tokens = std::to_string(kDefaultPromptWords), max_tokens = "128";
  bool ignore_eos = false;
  std::string prompts;
  int32_t turns = 1;
  int32_t preamble_tokens = 0;
  bool warm_up = false;
  std::string seed = "0";  // -1: random (printed)
  uint64_t warmup = 0;
  double timeout_s = 300;
  std::string json_path, svg_path;
  bool no_progress = false;
  std::vector<int32_t> sweep_concurrency;
  std::vector<double> sweep_rate;
  double price_per_hour = -1;
};

void write_file(const std::string& path, const std::string& text, const char* what) {
  std::ofstream f(path, std::ios::binary);
  if (!f || !(f << text) || !(f.flush())) throw Error(fmt::format("cannot write {} file {}", what, path));
}

int run(const BenchCliArgs& a, CLI::App& sub) {
  BenchOptions o;
  o.http.server = parse_server_url(a.url);
  o.http.keep_alive = a.transport == "http-keepalive";
  o.websocket = a.transport == "ws";
  if (o.http.server.tls) {  // https://: HTTPS, or WSS with --transport ws
    o.http.tls = make_tls_client_context(TlsClientOptions{a.insecure, a.cacert});
  } else if (a.insecure || !a.cacert.empty()) {
    throw UsageError(std::string(a.insecure ? "--insecure" : "--cacert") + " needs an https:// --url");
  }
  o.http.timeout = std::chrono::milliseconds(static_cast<int64_t>(a.timeout_s * 1e3));
  o.http.api_key = a.api_key;
  if (o.http.api_key.empty()) {
    if (const char* k = std::getenv("OPENAI_API_KEY")) o.http.api_key = k;
  }
  if (!a.extra_body.empty()) o.http.extra_body = nlohmann::json::parse(a.extra_body);  // checked by the option
  o.workload.api = a.endpoint == "chat"        ? Api::Chat
                   : a.endpoint == "responses" ? Api::Responses
                   : a.endpoint == "messages"  ? Api::Messages
                                               : Api::Completions;
  if (o.websocket && o.workload.api == Api::Messages)
    throw UsageError("--transport ws: the Messages API has no WebSocket mode (use --endpoint chat for /v1/realtime, "
                     "responses for the Responses WebSocket mode)");
  if (a.warm_up && !(o.websocket && o.workload.api == Api::Responses))
    throw UsageError("--warm-up needs --endpoint responses --transport ws (the Responses WebSocket mode)");
  if (a.preamble_tokens > 0 && !message_api(o.workload.api))
    throw UsageError("--preamble-tokens needs a message API (--endpoint chat, responses or messages)");
  if (a.warm_up && a.preamble_tokens == 0) throw UsageError("--warm-up needs --preamble-tokens (the preamble it prefills)");
  o.workload.preamble_words = a.preamble_tokens;
  o.workload.warm_up = a.warm_up;
  o.workload.model = a.model;
  o.workload.prompt_tokens = LengthDistribution::parse(a.prompt_tokens);
  o.workload.max_tokens = LengthDistribution::parse(a.max_tokens);
  o.workload.ignore_eos = a.ignore_eos;
  o.workload.turns = a.turns;
  const uint64_t seed = resolve_seed(a.seed, "nexus bench");
  o.workload.seed = seed;
  if (!a.prompts.empty()) {
    o.workload.prompts = load_prompts_jsonl(a.prompts);
    o.prompts_file = a.prompts;
  }
  o.load.concurrency = a.concurrency;
  o.load.rate = a.rate;
  o.load.max_inflight = a.max_inflight;
  o.load.seed = seed;
  const bool has_requests = sub.count("--requests") > 0, has_duration = sub.count("--duration") > 0;
  if (has_requests) o.load.sessions = a.requests;
  if (has_duration) o.load.duration_s = a.duration_s;
  if (!has_requests && !has_duration) o.load.sessions = 100;
  o.warmup = a.warmup;
  o.sweep_concurrency = a.sweep_concurrency;
  o.sweep_rate = a.sweep_rate;
  if (sub.count("--price-per-hour")) o.price_per_hour = a.price_per_hour;
  o.progress = !a.no_progress && isatty(STDERR_FILENO);
  o.log = [](const std::string& s) { std::fprintf(stderr, "nexus bench: %s\n", s.c_str()); };

  const BenchReport report = run_bench(o);

  const bool json_stdout = a.json_path == "-";
  const std::string text = report_text(report);
  std::fputs(text.c_str(), json_stdout ? stderr : stdout);
  if (!a.json_path.empty()) {
    const std::string j = report_json(report).dump(2) + "\n";
    if (json_stdout) {
      std::fputs(j.c_str(), stdout);
    } else {
      write_file(a.json_path, j, "JSON");
    }
  }
  if (!a.svg_path.empty()) write_file(a.svg_path, sweep_svg(report), "SVG");
  std::fflush(stdout);
  uint64_t failed = 0;
  for (const PhaseReport& p : report.phases) failed += p.failed;
  if (failed > 0) {
    std::fprintf(stderr, "nexus bench: %llu request(s) failed\n", static_cast<unsigned long long>(failed));
    return 3;
  }
  return 0;
}

std::function<int()> setup(CLI::App& sub) {
  auto a = std::make_shared<BenchCliArgs>();
  constexpr int64_t kMaxCount = std::numeric_limits<int64_t>::max();
  sub.add_option("--url", a->url, "server root, http(s)://HOST:PORT[/PREFIX]")
      ->capture_default_str()
      ->check(parses_with([](const std::string& url) {
        try {
          parse_server_url(url);
        } catch (const Error& e) {  // "--url X: why": CLI11 names the option already
          const std::string why = e.what();
          throw Error(why.rfind("--url ", 0) == 0 ? why.substr(6) : why);
        }
      }));
  sub.add_option("--endpoint", a->endpoint,
                 "completions (/v1/completions, prompt), chat (/v1/chat/completions), responses (/v1/responses) or "
                 "messages (/v1/messages, Anthropic)")
      ->capture_default_str()->check(CLI::IsMember({"completions", "chat", "responses", "messages"}));
  sub.add_option("--transport", a->transport,
                 "http (a new TCP connection per request), http-keepalive (one connection per worker) or ws "
                 "(a WebSocket per bench session: /v1/realtime, or the Responses WebSocket mode with --endpoint "
                 "responses; only each turn's new input is sent)")
      ->capture_default_str()->check(CLI::IsMember({"http", "http-keepalive", "ws"}));
  sub.add_option("--model", a->model, "\"model\" to send (default: the first id of GET /v1/models)");
  sub.add_option("--api-key", a->api_key, "bearer token (default: $OPENAI_API_KEY)");
  auto* insecure = sub.add_flag("--insecure,-k", a->insecure,
                                "https://: do not verify the server's certificate (a self-signed test one)");
  sub.add_option("--cacert", a->cacert, "https://: PEM file of the CA(s) to verify the server's certificate with")
      ->check(CLI::ExistingFile)
      ->excludes(insecure);
  sub.add_option("--extra-body", a->extra_body, "JSON object merged into every request body")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            return nlohmann::json::parse(text, nullptr, false).is_object() ? "" : "'" + text + "' is not a JSON object";
          },
          ""));
  auto* conc = sub.add_option("-c,--concurrency", a->concurrency, "closed loop: requests in flight")
                   ->capture_default_str()->check(range(1, 100000));
  auto* rate = sub.add_option("--rate", a->rate, "open loop: Poisson arrivals, sessions per second")
                   ->check(above(0));
  rate->excludes(conc);
  sub.add_option("-n,--requests", a->requests, "sessions to run (a session is --turns requests; default 100)")
      ->check(range(int64_t{1}, kMaxCount));
  sub.add_option("--duration", a->duration_s, "run for this many seconds (no new session after it)")
      ->check(above(0));
  sub.add_option("--max-inflight", a->max_inflight, "open loop: most sessions in flight")
      ->capture_default_str()->check(range(1, 100000));
  sub.add_option("--prompt-tokens", a->prompt_tokens, "prompt length in words: N, uniform:MIN:MAX, normal:MEAN:SD")
      ->capture_default_str()
      ->check(parses_with(LengthDistribution::parse));
  sub.add_option("--max-tokens", a->max_tokens, "max_tokens per request: N, uniform:MIN:MAX, normal:MEAN:SD")
      ->capture_default_str()
      ->check(parses_with(LengthDistribution::parse));
  sub.add_flag("--ignore-eos", a->ignore_eos, "send ignore_eos: true (generate exactly max_tokens on Nexus/vLLM)");
  sub.add_option("--prompts", a->prompts, "JSONL file: {\"prompt\": ...} or {\"messages\": [...]}, optional max_tokens")
      ->check(CLI::ExistingFile);
  sub.add_option("--preamble-tokens", a->preamble_tokens,
                 "an agent's preamble: a system message of N words, the same in every session, before turn 1 "
                 "(message APIs)")
      ->capture_default_str()->check(range(0, 1 << 20));
  sub.add_flag("--warm-up", a->warm_up,
               "Responses over ws: prefill the preamble with a generate:false response.create before turn 1, as "
               "Codex CLI does (not counted in turn 1's times)");
  sub.add_option("--turns", a->turns, "chat turns per session (HTTP resends the history each turn; ws sends only the new input)")
      ->capture_default_str()->check(range(1, 1000));
  add_seed_option(sub, a->seed, "seed of prompts, lengths and arrivals; -1 = random (printed)");
  sub.add_option("--warmup", a->warmup, "sessions run first and not counted")
      ->capture_default_str()
      ->check(range(int64_t{0}, kMaxCount));
  sub.add_option("--timeout", a->timeout_s, "per-request limit in seconds, connect included")
      ->capture_default_str()
      ->check(above(0))
      ->check(range(0.0, 86400.0));
  sub.add_option("--json", a->json_path, "write the JSON report to FILE (- = stdout; the table then goes to stderr)");
  sub.add_option("--svg", a->svg_path, "write an SVG chart of TTFT/ITL/E2E percentiles per load level");
  sub.add_flag("--no-progress", a->no_progress, "no live progress bar on stderr");
  auto* sweep_conc = sub.add_option("--sweep-concurrency", a->sweep_concurrency, "one phase per level, e.g. 1,2,4,8")
                         ->delimiter(',')->excludes(rate)->check(range(1, 100000));
  auto* sweep_rate = sub.add_option("--sweep-rate", a->sweep_rate, "one open-loop phase per rate, e.g. 1,2,4")
                         ->delimiter(',')->check(above(0));
  sweep_rate->excludes(conc)->excludes(sweep_conc);
  sub.add_option("--price-per-hour", a->price_per_hour, "server cost in USD/hour: prints cost per million output tokens")
      ->check(range(0.0, 1e9));
  CLI::App* app = &sub;
  return [a, app] { return run(*a, *app); };
}

const CommandRegistrar reg{{"bench", "load-test an OpenAI-compatible server: TTFT, ITL, TPOT, E2E, throughput", setup}};

}  // namespace
}  // namespace nexus::cli
