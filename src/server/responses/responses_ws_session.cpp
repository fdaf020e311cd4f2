#include "server/responses/responses_ws_session.h"

#include <utility>

#include <nlohmann/json.hpp>

#include "server/prompt_builder.h"
#include "server/responses/responses_request.h"
#include "server/tool_calls/request.h"
#include "util/json_depth.h"

namespace nexus::server {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;
using tcp = boost::asio::ip::tcp;

namespace {

json error_json(int status, const std::string& type, const std::string& code, const std::string& message,
                const std::string& param) {
  return {{"type", "error"},
          {"status", status},
          {"error", {{"type", type}, {"code", code.empty() ? json() : json(code)}, {"message", message},
                     {"param", param.empty() ? json() : json(param)}}}};
}

constexpr bool kAnswersCreate = true;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace

ResponsesWsSession::ResponsesWsSession(tcp::socket socket, ServerContext& ctx)
    : WsSession(std::move(socket), ctx), engine_session_(next_engine_session()), connection_store_(SIZE_MAX) {}

ResponsesWsSession::~ResponsesWsSession() = default;

std::string ResponsesWsSession::error_message(const std::string& code, const std::string& message) const {
  const int status = code == "server_shutting_down" ? 503 : 400;
  return dump(error_json(status, status >= 500 ? "server_error" : "invalid_request_error", code, message, ""));
}

void ResponsesWsSession::send_error(const ApiError& e, bool answers_create) {
  json ev = error_json(e.status, e.type, e.code, e.message, e.param);
  if (answers_create) ev["event"] = "response.create";
  std::string msg = dump(ev);
  if (e.status < 500) refuse(std::move(msg));  // the client's mistake: counted against its flood budget
  else send(std::move(msg));
}

ResponsesWsSession::Prepared ResponsesWsSession::prepare(std::string_view text) {
  Prepared p;
  try {
    ojson ev;
    try {
      ev = parse_json_bounded<ojson>(text);
    } catch (const JsonTooDeep& e) {
      throw nesting_too_deep(e.limit);
    } catch (const ojson::exception& e) {
      throw bad_request(std::string("The message is not valid JSON: ") + e.what(), "", "invalid_json");
    }
    // A small message's type was read by on_text; a large one's is read here.
    const auto type = ev.is_object() ? ev.find("type") : ev.end();
    if (!ev.is_object() || type == ev.end() || !type->is_string() || type->get<std::string>() != "response.create")
      throw bad_request("A large message must be a response.create (the only message that carries input).", "type",
                        "invalid_value");
    p.answers_create = true;
    ev.erase("type");
    ResponsesParseOptions o;
    o.max_priority = ctx_.opts.max_request_priority;
    o.strict_tools = ctx_.opts.strict_tools;
    o.websocket = true;
    o.n_ctx = backend_.n_ctx();
    ResponsesRequest req = parse_responses_request(ev.dump(), ctx_.router.responses(), o, &connection_store_);
    // A warm-up's prompt stops before the assistant's turn opens: it is then
    // a prefix of the next turn's, whose KV is all reused.
    req.conversation.add_generation_prompt = req.generate;
    p.request = build_generation(req.conversation, backend_);
    p.generate = req.generate;
    if (!p.generate) {  // prefill only: the prompt's KV is kept for the next response
      p.request.stop.max_tokens = 0;
      p.request.grammar = nullptr;
      p.request.prediction.clear();
    }
    p.formatter = std::make_unique<ResponsesFormatter>(
        req, backend_.model_id(), tool_calls::response_setup(req.conversation.tool_use, backend_),
        &ctx_.router.responses(), &connection_store_,
        ResponsesFormatter::Framing::Frames);
  } catch (const ApiError& e) {
    p.error = e;
  } catch (const std::exception& e) {
    p.error = ApiError(500, std::string("internal error: ") + e.what(), "", "", "server_error");
  }
  return p;
}

void ResponsesWsSession::on_text(std::string_view text) {
  // The type first (a small probe of the whole message would cost the same
  // parse: a large message is a response.create or a mistake).
  std::string type;
  if (text.size() < TokenizerPool::kOffThreadBytes) {
    const json ev = parse_json_bounded_or_discarded(text);
    if (ev.is_object() && ev.contains("type") && ev["type"].is_string()) type = ev["type"];
    else if (ev.is_discarded()) return send_error(bad_request("The message is not valid JSON.", "", "invalid_json"));
  } else {
    type = "response.create";
  }
  if (type == "response.cancel") {
    if (!running_) return send_error(bad_request("No response is running.", "type", "no_response"));
    return handle_->cancel();
  }
  if (type != "response.create")
    return send_error(bad_request("Unsupported message type '" + printable(type) +
                                      "': this connection takes response.create and response.cancel.",
                                  "type", "invalid_value"));
  if (busy())
    return send_error(bad_request("A response is already running on this connection; wait for its end or send "
                                  "response.cancel.", "", "response_in_progress"),
                      kAnswersCreate);
  if (ctx_.draining.load(std::memory_order_relaxed))
    return send_error(ApiError(503, "The server is shutting down; connect to another replica.", "",
                               "server_shutting_down", "server_error"),
                      kAnswersCreate);
  if (text.size() < TokenizerPool::kOffThreadBytes) return start_response(prepare(text));
  // A large message (Codex's first is ~40 KB of instructions and tools):
  // parsed, rendered and tokenized on the pool; reading waits, so messages
  // keep their order.
  preparing_ = true;
  hold_reading();
  const bool queued = ctx_.tokenizer.post([self = self(), text = std::string(text)]() mutable {
    auto p = std::make_shared<Prepared>(self->prepare(text));
    std::string().swap(text);
    ResponsesWsSession& s = *self;
    gated_post(*s.ctx_.gate, s.executor(), [self = std::move(self), p] {
      self->preparing_ = false;
      self->start_response(std::move(*p));
      self->resume_reading();
    });
  });
  if (!queued) {
    preparing_ = false;
    send_error(ApiError(503, "The server is shutting down; connect to another replica.", "", "server_shutting_down",
                        "server_error"),
               kAnswersCreate);
    resume_reading();
  }
}

void ResponsesWsSession::start_response(Prepared p) {
  if (gone()) return;
  if (closing_down()) return after_response();
  if (p.error) return send_error(*p.error, p.answers_create);
  p.request.session = engine_session_;
  relay_ = std::make_shared<WsRelay>(ctx_.gate, shared_from_this());
  handle_ = backend_.submit(std::move(p.request), [relay = relay_](const GenerationEvent& ev) { relay->deliver(ev); });
  if (!handle_) {
    relay_->detach();
    relay_.reset();
    return send_error(ApiError(429, "The server is busy: the request queue is full. Retry shortly.", "",
                               "queue_full", "rate_limit_error"),
                      kAnswersCreate);
  }
  formatter_ = std::move(p.formatter);
  generate_ = p.generate;
  running_ = true;
  if (generate_) {
    formatter_->stream_preamble();
    send_frames();
  }
}

void ResponsesWsSession::send_frames() {
  for (std::string& f : formatter_->take_frames()) send(std::move(f));
}

void ResponsesWsSession::on_engine_event(const GenerationEvent& ev) {
  if (!running_) return;
  if (!gone()) {
    const bool prefill_only = !generate_ && ev.finish != FinishReason::Error && ev.finish != FinishReason::Cancelled;
    if (!generate_ && !ev.done) return;
    if (prefill_only) formatter_->events_without_output(ev.usage);
    else formatter_->on_event(ev, 0);
    send_frames();
  }
  if (!ev.done) return;
  running_ = false;
  relay_.reset();
  handle_.reset();
  if (gone()) return backend_.end_session(engine_session_);
  const bool kept = ev.finish != FinishReason::Error && ev.finish != FinishReason::Cancelled;
  if (kept) {
    // The connection keeps its last response only.
    if (!last_id_.empty() && last_id_ != formatter_->id()) connection_store_.erase(last_id_);
    last_id_ = formatter_->id();
  }
  formatter_.reset();
  after_response();
}

void ResponsesWsSession::on_backlog() {
  if (running_) handle_->cancel();  // the reader is too slow: the response ends (response.failed)
}

void ResponsesWsSession::on_shutdown() {
  if (relay_) relay_->detach();
  if (!running_) return;
  handle_->cancel();
  running_ = false;
  relay_.reset();
  handle_.reset();
}

bool ResponsesWsSession::on_closing() {
  if (!running_) return false;
  handle_->cancel();
  return true;
}

void ResponsesWsSession::on_gone() {
  // A running response is cancelled; its final event ends the engine session.
  if (running_) handle_->cancel();
  else backend_.end_session(engine_session_);
}

}  // namespace nexus::server
