// `nexus serve`: the OpenAI-compatible HTTP server (src/server/) over one
// model. Prints "listening on http://HOST:PORT" on stdout once it accepts
// connections (with --port 0 the port is the one the OS picked), one line per
// request on stderr. The first SIGINT/SIGTERM drains (new requests get 503,
// running generations finish, up to --drain-timeout, and the drain lasts at
// least --drain-grace even when idle); a second stops at once.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <ctime>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include <pthread.h>
#include <sys/resource.h>
#include <string>

#include "cli/command.h"
#include "cli/memory_arg.h"
#include "cli/open_model.h"
#include "cli/usage_error.h"
#include "engine/engine.h"
#include "engine/spec/draft_model.h"
#include "gguf/gguf_file.h"
#include "model/llama_model.h"
#include "server/backend.h"
#include "server/chat_template.h"
#include "server/http_server.h"
#include "server/request_priority.h"
#include "template/jinja.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/json_depth.h"

namespace nexus::cli {
namespace {

struct ServeArgs {
  std::string model;
  std::string host = "127.0.0.1";
  int port = 8080;
  int32_t n_threads = 0;
  int io_threads = 2;
  int32_t n_ctx = 0;
  int32_t max_queue = 64;
  int32_t max_seqs = 16;
  int32_t max_batch_tokens = 128;
  std::string kv_memory = "0";
  std::string kv_type = "f16";
  std::string chat_template = "auto";
  std::string chat_template_file;
  std::string alias;
  std::vector<std::string> cors_allow_origins;
  std::string api_key;
  double drain_timeout = 10;  // seconds
  double drain_grace = 1;     // seconds
  int max_connections = 0;    // 0 = from RLIMIT_NOFILE
  int body_limit_mib = 1;     // --body-limit-mib
  double idle_timeout = 60, header_timeout = 30, body_timeout = 60;  // seconds
  int max_json_depth = kDefaultMaxJsonDepth;  // util/json_depth.h
  std::string spec = "off";   // speculative decoding proposer: off | ngram
  int32_t spec_ngram = 3;
  int32_t spec_k = 5;
  int32_t spec_max_seqs = 4;
  std::string draft_model;    // --draft-model: a GGUF of the same vocabulary, or empty
  std::string max_request_priority = "interactive";  // a class name or an integer (server/request_priority.h)
  int64_t responses_store_mib = 256;  // --responses-store-bytes, in MiB
  bool strict_tools = false;
};

// Graceful shutdown after the first stop signal: new requests get 503 while
// the running generations finish (and their responses are written), for at
// most `timeout` seconds or until a second stop signal; then stop() cancels
// whatever is left. Idle or not, it lasts at least `grace` seconds (at most
// `timeout`): the window in which new requests (and a load balancer's health
// checks) get the documented 503 and /metrics still answers, instead of
// connections refused. Returns how many generations were still running.
int32_t drain(server::HttpServer& http, const Engine& engine, const sigset_t& stop_signals, double timeout,
              double grace) {
  http.drain();
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::duration<double>(timeout);
  const auto grace_end = start + std::chrono::duration<double>(std::min(grace, timeout));
  for (;;) {
    const EngineStats st = engine.stats();
    const int32_t left = std::max(st.running + st.waiting, http.in_flight());
    if (left == 0 && std::chrono::steady_clock::now() >= grace_end) return 0;
    if (std::chrono::steady_clock::now() >= deadline) return left;
    const timespec poll{0, 10'000'000};  // 10 ms
    if (sigtimedwait(&stop_signals, nullptr, &poll) > 0) return left;
  }
}

// The chat template: --chat-template-file, else the GGUF's
// tokenizer.chat_template (auto), else the plain fallback. A template that
// does not parse stops the server with the parse error (Error), naming the
// options that get around it.
server::ChatTemplate pick_chat_template(const GgufFile& gguf, const Tokenizer& tok, const ServeArgs& a) {
  if (a.chat_template == "plain") return {};
  auto text = [&](int32_t id) { return id >= 0 && id < tok.n_vocab() ? tok.token_text(id) : std::string(); };
  std::string source, origin;
  if (!a.chat_template_file.empty()) {
    std::ifstream f(a.chat_template_file, std::ios::binary);
    if (!f) throw Error("--chat-template-file: cannot read '" + a.chat_template_file + "'");
    std::stringstream ss;
    ss << f.rdbuf();
    source = ss.str();
    origin = "file";
  } else {
    std::optional<std::string> s;
    try {
      s = gguf.get_string("tokenizer.chat_template");
    } catch (const Error&) {
      throw Error("tokenizer.chat_template is not a string; serve with --chat-template plain or --chat-template-file");
    }
    if (!s || s->empty()) {
      std::fprintf(stderr, "nexus serve: the model has no chat template; chat prompts use the plain fallback\n");
      return {};
    }
    source = std::move(*s);
    origin = "gguf";
  }
  try {
    return server::ChatTemplate(source, origin, text(tok.bos_id()), text(tok.eos_id()));
  } catch (const tmpl::TemplateError& e) {
    throw Error(std::string(origin == "file" ? "--chat-template-file" : "the GGUF's tokenizer.chat_template") +
                ": " + e.what() + " (serve with --chat-template plain or --chat-template-file to replace it)");
  }
}

// Raises the descriptor soft limit to the hard one (at most 65536), as
// servers commonly do, so the default --max-connections (the soft limit
// less 64) is not the shell's 1024 where more is allowed.
void raise_descriptor_limit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return;
  const rlim_t want = lim.rlim_max == RLIM_INFINITY ? 65536 : std::min<rlim_t>(lim.rlim_max, 65536);
  if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < want) {
    lim.rlim_cur = want;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
}

int serve(ServeArgs& a) {
  set_max_json_depth(a.max_json_depth);
  const int64_t kv_memory = parse_memory_arg(a.kv_memory, "--kv-memory");

  // Block the stop signals before any thread starts, so every thread
  // inherits the mask and only sigwait() below receives them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  // A shell starts background jobs with SIGINT ignored, and an ignored signal
  // is discarded instead of left pending for sigwait(): restore the default
  // (harmless while blocked) so `kill -INT` still stops the server.
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);

  const OpenedModel opened = open_model(a.model);
  const GgufFile& gguf = *opened.gguf;
  std::unique_ptr<Tokenizer> tok = Tokenizer::from_gguf(gguf);
  LlamaModel model(gguf);
  check_ctx_size(a.n_ctx, model.config().n_ctx_train);
  // The draft model (docs/speculative.md): opened like the model, refused
  // before anything starts when its vocabulary is not the model's.
  std::optional<OpenedModel> draft_opened;
  std::unique_ptr<LlamaModel> draft;
  // A proposer that --spec-max-seqs 0 would never run is a contradiction,
  // refused like any other bad option (the draft's KV pool would also be
  // allocated for nothing).
  const std::pair<bool, const char*> proposers[] = {{!a.draft_model.empty(), "--draft-model"},
                                                    {a.spec == "ngram", "--spec ngram"}};
  for (const auto& [given, option] : proposers)
    if (given && a.spec_max_seqs == 0)
      throw UsageError(fmt::format("{} with --spec-max-seqs 0: it would never run; drop one of them", option));
  if (!a.draft_model.empty()) {
    // Every refusal names the option: "model file not found" alone would
    // read as the -m model's.
    std::string why;
    try {
      draft_opened = open_model(a.draft_model, "draft model");
      const std::unique_ptr<Tokenizer> draft_tok = Tokenizer::from_gguf(*draft_opened->gguf);
      try {
        spec::check_same_vocabulary(*tok, *draft_tok);
      } catch (const Error& e) {
        throw Error(std::string(e.what()) + "; a draft model must have the model's vocabulary");
      }
      draft = std::make_unique<LlamaModel>(*draft_opened->gguf);
    } catch (const std::exception& e) {
      why = e.what();
    }
    if (!why.empty()) throw Error(fmt::format("--draft-model {}: {}", a.draft_model, why));
  }
  EngineOptions eopts;
  eopts.n_threads = a.n_threads;
  eopts.n_ctx = a.n_ctx;
  eopts.max_queue = a.max_queue;
  eopts.max_seqs = a.max_seqs;
  eopts.max_batch_tokens = a.max_batch_tokens;
  eopts.kv_memory = kv_memory;
  eopts.kv_type = *kv_type_from_name(a.kv_type);  // checked by the option
  eopts.spec.proposer = a.spec == "ngram" ? SpecProposer::Ngram : SpecProposer::None;  // checked by the option
  eopts.spec.ngram = a.spec_ngram;
  eopts.spec.k = a.spec_k;
  eopts.spec.max_seqs = a.spec_max_seqs;
  eopts.spec.draft_model = draft.get();
  Engine engine(model, *tok, eopts);
  const std::string id = a.alias.empty() ? opened.id : a.alias;
  server::EngineBackend backend(engine, id, pick_chat_template(gguf, *tok, a));

  raise_descriptor_limit();
  server::HttpServerOptions opts;
  opts.host = a.host;
  opts.port = static_cast<uint16_t>(a.port);
  opts.io_threads = a.io_threads;
  opts.cors_allow_origins = a.cors_allow_origins;
  opts.max_connections = a.max_connections;
  opts.body_limit = static_cast<size_t>(a.body_limit_mib) << 20;
  auto ms = [](double seconds) { return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)); };
  opts.idle_timeout = ms(a.idle_timeout);
  opts.header_timeout = ms(a.header_timeout);
  opts.body_timeout = ms(a.body_timeout);
  opts.api_key = a.api_key;
  opts.max_request_priority = *server::parse_priority_cap(a.max_request_priority);  // checked by the option
  opts.responses_store_bytes = static_cast<size_t>(a.responses_store_mib) << 20;
  opts.strict_tools = a.strict_tools;
  opts.log = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  // Declared after the engine: destroyed (and stopped) first, so no engine
  // event is posted to a server that is gone.
  server::HttpServer http(backend, opts);
  http.start();
  const EngineStats st = engine.stats();
  std::string windowed;  // the sliding-window layers' own pool (docs/ARCHITECTURE.md, Paged KV cache)
  if (st.kv_swa_blocks_total > 0)
    windowed = " + " + std::to_string(st.kv_swa_blocks_total) + " for the windowed layers (window " +
               std::to_string(st.swa_window) + ")";
  std::fprintf(stderr, "model %s: n_ctx %d, chat template %s, KV pool %d blocks%s of %d tokens (%s, %.1f MiB)\n",
               backend.model_id().c_str(), backend.n_ctx(), backend.chat_template().origin().c_str(),
               st.kv_blocks_total, windowed.c_str(), st.block_size, kv_type_name(eopts.kv_type),
               st.kv_bytes / 1048576.0);
  if (draft)
    std::fprintf(stderr, "draft model %s: KV pool %d blocks of %d tokens\n", draft_opened->id.c_str(),
                 st.draft_kv_blocks_total, st.block_size);
  std::printf("listening on http://%s:%u\n", http.host().c_str(), static_cast<unsigned>(http.port()));
  std::fflush(stdout);

  int sig = 0;
  sigwait(&stop_signals, &sig);
  std::fprintf(stderr, "nexus serve: %s, draining (up to %.0f s; send it again to stop now)\n",
               sig == SIGINT ? "SIGINT" : "SIGTERM", a.drain_timeout);
  if (const int32_t left = drain(http, engine, stop_signals, a.drain_timeout, a.drain_grace); left > 0)
    std::fprintf(stderr, "nexus serve: cancelling %d unfinished generation(s)\n", left);
  std::fprintf(stderr, "nexus serve: shutting down\n");
  http.stop();
  return 0;
}

std::function<int()> setup(CLI::App& sub) {
  auto a = std::make_shared<ServeArgs>();
  sub.add_option("-m,--model", a->model, kModelHelp)->check(model_path());
  sub.add_option("--host", a->host, "address to listen on")->capture_default_str();
  constexpr int32_t kMaxInt = std::numeric_limits<int32_t>::max();
  sub.add_option("--port", a->port, "TCP port; 0 = any free port (printed at startup)")
      ->capture_default_str()
      ->check(range(0, 65535));
  sub.add_option("-t,--threads", a->n_threads, "kernel threads; 0 = all cores")
      ->capture_default_str()
      ->check(range(0, 4096));
  sub.add_option("--io-threads", a->io_threads, "HTTP I/O threads")->capture_default_str()->check(range(1, 64));
  sub.add_option("-c,--ctx-size", a->n_ctx, "context size in tokens (prompt + output); 0 = the model's")
      ->capture_default_str()
      ->check(range(0, kMaxInt));
  sub.add_option("--max-queue", a->max_queue, "requests waiting for admission before HTTP 429")
      ->capture_default_str()
      ->check(range(1, kMaxInt));
  sub.add_option("--max-seqs", a->max_seqs, "sequences running at once")->capture_default_str()->check(range(1, 4096));
  sub.add_option("--max-batch-tokens", a->max_batch_tokens, "tokens per engine step (decode + prefill chunks)")
      ->capture_default_str()
      ->check(range(1, 1 << 20));
  sub.add_option("--kv-memory", a->kv_memory,
                 "KV cache budget in bytes (suffixes K, M, G) or a fraction of available RAM (e.g. 0.25); "
                 "0 = room for max-seqs full contexts, at most 1/4 of RAM")
      ->capture_default_str();
  sub.add_option("--drain-timeout", a->drain_timeout,
                 "seconds a stop signal waits for running generations to finish (new requests get 503); "
                 "a second signal stops at once")
      ->capture_default_str()
      ->check(range(0.0, 3600.0));
  sub.add_option("--drain-grace", a->drain_grace,
                 "seconds the drain lasts at least, even with nothing running (new requests get 503, "
                 "/metrics answers); at most --drain-timeout")
      ->capture_default_str()
      ->check(range(0.0, 3600.0));
  sub.add_option("--body-limit-mib", a->body_limit_mib,
                 "MiB a request body (and a realtime message) may hold; beyond it 413. Agents over HTTP send "
                 "the whole conversation every turn")
      ->capture_default_str()
      ->check(range(1, 1024));
  sub.add_option("--max-connections", a->max_connections,
                 "open connections (HTTP and realtime) at most; beyond it 503 too_many_connections; "
                 "0 = the descriptor limit (RLIMIT_NOFILE, raised to its hard limit up to 65536) less 64")
      ->capture_default_str()
      ->check(range(0, 1 << 20));
  sub.add_option("--idle-timeout", a->idle_timeout,
                 "seconds a connection may wait for the first byte of a request (keep-alive) before it is closed")
      ->capture_default_str()
      ->check(range(0.001, 86400.0));
  sub.add_option("--header-timeout", a->header_timeout,
                 "seconds from a request's first byte to the end of its header; beyond it 408")
      ->capture_default_str()
      ->check(range(0.001, 86400.0));
  sub.add_option("--body-timeout", a->body_timeout, "seconds from a request's header to the end of its body; beyond it 408")
      ->capture_default_str()
      ->check(range(0.001, 86400.0));
  sub.add_option("--max-json-depth", a->max_json_depth,
                 "deepest nesting of arrays and objects accepted in a request body or WebSocket event (and of GBNF "
                 "groups); deeper is 400 nesting_too_deep")
      ->capture_default_str()
      ->check(range(1, kMaxJsonDepthLimit));
  sub.add_option("--kv-type", a->kv_type, "KV cache element type: f16, f32, q8_0 (any case)")
      ->capture_default_str()
      ->check(kv_type_name());
  sub.add_option("--spec", a->spec,
                 "speculative decoding proposer: off, or ngram (prompt lookup); a request's \"prediction\" "
                 "is always used")
      ->capture_default_str()
      ->check(CLI::IsMember({"off", "ngram"}));
  sub.add_option("--spec-ngram", a->spec_ngram, "longest n-gram --spec ngram looks up (tokens)")
      ->capture_default_str()
      ->check(range(1, 64));
  sub.add_option("--spec-k", a->spec_k, "most proposed tokens verified per sequence and step")
      ->capture_default_str()
      ->check(range(1, 64));
  sub.add_option("--draft-model", a->draft_model,
                 "speculative decoding with a draft model: a small GGUF of the same vocabulary (file, hf: or "
                 "ollama: as -m) proposes up to --spec-k tokens greedily, none while it would not pay (timed at "
                 "startup); a request's \"prediction\" goes first, --spec ngram after it")
      ->check(model_path());
  sub.add_option("--spec-max-seqs", a->spec_max_seqs,
                 "no speculation in a step with more running sequences than this (0: never speculate)")
      ->capture_default_str()
      ->check(range(0, 4096));
  sub.add_option("--chat-template", a->chat_template,
                 "auto (the GGUF's tokenizer.chat_template, run as Jinja) or plain (the documented fallback)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "plain"}));
  sub.add_option("--chat-template-file", a->chat_template_file,
                 "a Jinja chat template file to use instead of the GGUF's (as transformers' chat_template)");
  sub.add_option("--alias", a->alias, "model id served in /v1/models and accepted in \"model\" (default: file stem)");
  sub.add_option("--api-key", a->api_key,
                 "require `Authorization: Bearer KEY` (401 otherwise); GET /health, /metrics and /load stay open "
                 "(default: $NEXUS_API_KEY)")
      ->envname("NEXUS_API_KEY")
      ->check(CLI::Validator(
          [](std::string& k) {
            return !k.empty() && k.find_first_of(" \t\r\n") == std::string::npos
                       ? std::string()
                       : std::string("an API key is one non-empty word (no spaces)");
          },
          "KEY"));
  sub.add_option("--max-request-priority", a->max_request_priority,
                 std::string("the highest \"priority\" a request may ask for: ") + server::kPriorityCapValues +
                     "; above it 400 priority_above_cap")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& p) {
            return server::parse_priority_cap(p) ? std::string() : "'" + p + "' is not " + server::kPriorityCapValues;
          },
          "PRIORITY"));
  sub.add_option("--responses-store-mib", a->responses_store_mib,
                 "MiB of stored responses kept for previous_response_id and GET /v1/responses/{id} "
                 "(least recently used out; 0 keeps none)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  sub.add_flag("--strict-tools", a->strict_tools,
               "refuse a request that offers a tool only its vendor runs (Responses' web_search, ..., Anthropic's "
               "server tools) with 400 unsupported_tool instead of leaving the tool out");
  add_cors_option(sub, a->cors_allow_origins);
  return [a] { return serve(*a); };
}

const CommandRegistrar reg{{"serve", "serve the OpenAI-compatible HTTP API", setup}};

}  // namespace
}  // namespace nexus::cli
