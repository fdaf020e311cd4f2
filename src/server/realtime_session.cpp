#include "server/realtime_session.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include <fmt/format.h>

#include "server/api_error.h"
#include "server/api_key.h"
#include "server/prompt_builder.h"
#include "server/realtime_input_probe.h"

namespace nexus::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = net::ip::tcp;
using nlohmann::json;
using realtime::EventError;

RealtimeSession::RealtimeSession(tcp::socket socket, ServerContext& ctx)
    : WsSession(std::move(socket), ctx),
      engine_session_(next_engine_session()),
      id_(fmt::format("sess_{}", engine_session_)),
      conv_(backend_) {}

RealtimeSession::~RealtimeSession() = default;

// A client offering subprotocols (a browser presenting its API key so,
// server/api_key.h) gets "realtime" selected; one offering none, none.
std::string RealtimeSession::subprotocol(const http::request<http::string_body>& req) const {
  const auto offered = req[http::field::sec_websocket_protocol];
  return offers_subprotocol(std::string_view(offered.data(), offered.size()), "realtime") ? "realtime" : "";
}

void RealtimeSession::on_open() {
  send(realtime::session_created(id_, backend_.model_id(), backend_.n_ctx(), backend_.chat_template().origin()));
}

std::string RealtimeSession::error_message(const std::string& code, const std::string& message) const {
  return realtime::error_event(code, message);
}

void RealtimeSession::on_text(std::string_view text) {
  if (text.size() < TokenizerPool::kOffThreadBytes) return handle_event(text);
  if (refuse_unparsed(text)) return;
  hold_reading();  // resumed once its event is handled
  parse_off_thread(std::string(text));
}

void RealtimeSession::on_backlog() {
  if (!running_ || overflow_) return;
  overflow_ = true;
  handle_->cancel();
}

void RealtimeSession::on_shutdown() {
  if (relay_) relay_->detach();
  if (!running_) return;  // on_gone(), now or after the close, then ends the engine session
  handle_->cancel();
  running_ = false;
  relay_.reset();
  handle_.reset();
}

bool RealtimeSession::on_closing() {
  redirect_pending_ = false;
  if (!running_) return false;
  handle_->cancel();  // its response.done goes out first
  return true;
}

void RealtimeSession::on_gone() {
  redirect_pending_ = false;
  // A running response is cancelled; its final event ends the engine
  // session (ending it now could race with the KV being kept at its end).
  if (running_) handle_->cancel();
  else backend_.end_session(engine_session_);
}

bool RealtimeSession::refuse_unparsed(std::string_view text) {
  const std::optional<uint64_t> bytes = realtime::probe_input_append(text);
  if (!bytes) return false;
  try {
    check_input_room(*bytes);
  } catch (const EventError& e) {
    refuse(realtime::error_event(e.code, e.message, "input.append"));
    return true;
  }
  return false;  // it fits: parsed in full, and appended
}

void RealtimeSession::parse_off_thread(std::string text) {
  auto job = [self = self(), text = std::move(text)]() mutable {
    auto ev = std::make_shared<std::optional<realtime::ClientEvent>>();
    auto error = std::make_shared<std::optional<EventError>>();
    try {
      *ev = realtime::parse_client_event(text);
    } catch (const EventError& e) {
      *error = e;
    }
    std::string().swap(text);
    RealtimeSession& s = *self;
    gated_post(*s.ctx_.gate, s.executor(), [self = std::move(self), ev, error] {
      if (self->gone()) return;
      if (*error) self->refuse(realtime::error_event((*error)->code, (*error)->message, (*error)->event));
      else if (!self->closing_down()) self->dispatch(std::move(**ev));
      self->resume_reading();
    });
  };
  if (!ctx_.tokenizer.post(std::move(job))) {
    send(realtime::error_event("server_shutting_down", "The server is shutting down; open a session on another replica."));
    resume_reading();
  }
}

void RealtimeSession::handle_event(std::string_view text) {
  realtime::ClientEvent ev;
  try {
    ev = realtime::parse_client_event(text);
  } catch (const EventError& e) {
    return refuse(realtime::error_event(e.code, e.message, e.event));
  }
  dispatch(std::move(ev));
}

void RealtimeSession::dispatch(realtime::ClientEvent ev) {
  const std::string type = ev.type_name;
  try {
    switch (ev.type) {
      case realtime::EventType::SessionUpdate:
        return update_session(ev.session);
      case realtime::EventType::InputAppend:
        // Also while a response runs: the input waits for the next response.
        return append_input(std::move(*ev.input));
      case realtime::EventType::ResponseCreate:
        return create_response(ev.response);
      case realtime::EventType::ResponseCancel:
        if (!running_)
          throw EventError("no_response", preparing_ ? "No response is running yet (its prompt is being tokenized)."
                                                     : "No response is running.");
        redirect_pending_ = false;
        return handle_->cancel();
      case realtime::EventType::ResponseRedirect:
        // Bad overrides are refused now, before the running response is cancelled.
        if (preparing_)
          throw EventError("response_in_progress", "A response is being prepared; redirect it once it runs.");
        resolve(params_, ev.response);
        append_input(std::move(*ev.input));
        if (!running_) return create_response(ev.response);  // it ended already: just continue
        redirect_pending_ = true;
        redirect_overrides_ = std::move(ev.response);
        return handle_->cancel();
      case realtime::EventType::SessionClose:
        return close_when_done();  // a running response's response.done goes out first
    }
  } catch (const EventError& e) {
    refuse(realtime::error_event(e.code, e.message, e.event.empty() ? type : e.event));
  }
}

void RealtimeSession::update_session(const json& s) {
  json merged = params_;
  std::string system = conv_.system();
  for (auto it = s.begin(); it != s.end(); ++it) {
    if (it.key() == "system") {
      if (!it->is_null() && !it->is_string()) throw EventError("invalid_type", "'system' must be a string.");
      std::string next = it->is_string() ? it->get<std::string>() : std::string();
      if (next != system && conv_.started())
        throw EventError("invalid_state", "The conversation has started: its system prompt can no longer change.");
      system = std::move(next);
    } else if (it->is_null()) {
      merged.erase(it.key());
    } else {
      merged[it.key()] = *it;
    }
  }
  // Throws on anything invalid (max_tokens against n_ctx too), leaving the settings as they were.
  resolve(merged, json::object());
  params_ = std::move(merged);
  conv_.set_system(system);
  json shown = params_;
  shown["system"] = system;
  send(realtime::session_updated(id_, shown));
}

realtime::ResolvedParams RealtimeSession::resolve(const json& session, const json& overrides) const {
  return realtime::resolve_params(session, overrides, backend_.model_id(), backend_.n_ctx(),
                                  ctx_.opts.max_request_priority);
}

void RealtimeSession::append_input(realtime::InputItem item) {
  check_input_room(realtime::input_bytes(item));
  conv_.append_input(std::move(item));
}

void RealtimeSession::check_input_room(uint64_t item_bytes) const {
  // Each token stands for at most max_token_bytes() input bytes: input over
  // the room in bytes takes more tokens than the context has left, whatever
  // it tokenizes to. Refused here, before it is tokenized or even kept.
  const int64_t kept = static_cast<int64_t>(conv_.tokens().size());
  const int64_t room_tokens = std::max<int64_t>(0, backend_.n_ctx() - kept - 1);
  const uint64_t room_bytes = static_cast<uint64_t>(room_tokens) * backend_.max_token_bytes();
  const uint64_t bytes = conv_.pending_bytes() + item_bytes;
  if (bytes > room_bytes) {
    throw EventError("input_too_large",
                     fmt::format("Input too large for the context: the pending input would be {} bytes, and the "
                                 "context has room for {} more tokens (at most {} bytes, {} a token). This input "
                                 "was refused; the {} bytes queued before it stay.",
                                 bytes, room_tokens, room_bytes, backend_.max_token_bytes(), conv_.pending_bytes()));
  }
}

void RealtimeSession::create_response(const json& overrides) {
  if (running_ || preparing_)
    throw EventError("response_in_progress", "A response is running; cancel or redirect it first.");
  if (!conv_.has_pending()) throw EventError("no_input", "No new input: send input.append first.");
  realtime::ResolvedParams p = resolve(params_, overrides);
  if (ctx_.draining.load(std::memory_order_relaxed))
    throw EventError("server_shutting_down", "The server is shutting down; open a session on another replica.");
  const size_t n_items = conv_.pending_count();
  if (conv_.pending_bytes() < TokenizerPool::kOffThreadBytes) {
    std::optional<ApiError> error;
    std::vector<int32_t> prompt;
    try {
      prompt = conv_.build_prompt();
    } catch (const ApiError& e) {
      error = e;
    }
    return on_prompt_built(std::move(p), std::move(prompt), std::move(error), n_items);
  }
  // A large input: tokenized on the pool, over a copy of the conversation
  // (more input may arrive meanwhile; it stays pending for the next turn).
  preparing_ = true;
  auto snapshot = std::make_shared<realtime::Conversation>(conv_);
  auto params = std::make_shared<realtime::ResolvedParams>(std::move(p));
  const bool queued = ctx_.tokenizer.post([self = self(), snapshot, params, n_items]() mutable {
    auto prompt = std::make_shared<std::vector<int32_t>>();
    auto error = std::make_shared<std::optional<ApiError>>();
    try {
      *prompt = snapshot->build_prompt();
    } catch (const ApiError& e) {
      *error = e;
    }
    snapshot.reset();
    RealtimeSession& s = *self;
    gated_post(*s.ctx_.gate, s.executor(), [self = std::move(self), params, prompt, error, n_items] {
      self->preparing_ = false;
      try {
        self->on_prompt_built(std::move(*params), std::move(*prompt), std::move(*error), n_items);
      } catch (const EventError& e) {
        self->send(realtime::error_event(e.code, e.message, e.event.empty() ? "response.create" : e.event));
      }
    });
  });
  if (!queued) {
    preparing_ = false;
    throw EventError("server_shutting_down", "The server is shutting down; open a session on another replica.");
  }
}

// The prompt of the first `n_items` pending items, or the error that
// building it threw. Throws EventError.
void RealtimeSession::on_prompt_built(realtime::ResolvedParams p, std::vector<int32_t> prompt,
                                      std::optional<ApiError> error, size_t n_items) {
  if (gone()) return;
  if (closing_down()) return after_response();  // session.close (or shutdown) came meanwhile
  if (error) {
    // The chat template refused or failed on the pending input: it would
    // fail the same way at every response.create, so it is dropped.
    conv_.discard_pending(n_items);
    throw EventError(error->code.empty() ? "invalid_value" : error->code,
                     error->message + " The pending input was discarded.");
  }
  start_response(std::move(p), std::move(prompt), n_items);
}

void RealtimeSession::start_response(realtime::ResolvedParams p, std::vector<int32_t> prompt, size_t n_items) {
  const auto kept = static_cast<int32_t>(conv_.tokens().size());
  p.request.prompt_is_tokens = true;
  p.request.prompt_tokens.assign(prompt.begin(), prompt.end());
  if (ctx_.draining.load(std::memory_order_relaxed))
    throw EventError("server_shutting_down", "The server is shutting down; open a session on another replica.");
  GenerationRequest g;
  try {
    g = build_generation(p.request, backend_);
  } catch (const ApiError& e) {
    if (e.code == "context_length_exceeded") {
      // The queued input can never fit: drop it, or every later
      // response.create would fail the same way.
      conv_.discard_pending(n_items);
      throw EventError(e.code, e.message + " The pending input was discarded; the conversation keeps its " +
                                   std::to_string(kept) + " tokens.");
    }
    throw EventError(e.code.empty() ? "invalid_value" : e.code, e.message);
  }
  g.session = engine_session_;
  relay_ = std::make_shared<WsRelay>(ctx_.gate, shared_from_this());
  handle_ = backend_.submit(std::move(g), [relay = relay_](const GenerationEvent& ev) { relay->deliver(ev); });
  if (!handle_) {
    relay_->detach();
    relay_.reset();
    throw EventError("queue_full", "The server is busy; retry the response.create later.");
  }
  conv_.commit(std::move(prompt), n_items);
  running_ = true;
  overflow_ = false;
  return_tokens_ = p.return_tokens;
  response_id_ = fmt::format("resp_{}", ++responses_);
  const auto n = static_cast<int32_t>(conv_.tokens().size());
  send(realtime::response_created(response_id_, n, n - kept, return_tokens_ ? &conv_.tokens() : nullptr));
}

void RealtimeSession::on_engine_event(const GenerationEvent& ev) {
  if (!running_) return;
  if (ev.token >= 0) conv_.on_generated(ev.token);
  if (ev.done) return finish_response(ev);
  if (gone() || overflow_ || (ev.text.empty() && !return_tokens_)) return;
  send(realtime::response_delta(response_id_, ev.text, return_tokens_ ? std::optional(ev.token) : std::nullopt));
}

void RealtimeSession::finish_response(const GenerationEvent& ev) {
  running_ = false;
  relay_.reset();
  handle_.reset();
  conv_.on_response_end();
  if (gone()) return backend_.end_session(engine_session_);
  const bool token = return_tokens_ && ev.token >= 0;
  if (!overflow_ && (!ev.text.empty() || token))
    send(realtime::response_delta(response_id_, ev.text, token ? std::optional(ev.token) : std::nullopt));
  send(realtime::response_done(response_id_, ev, static_cast<int32_t>(conv_.tokens().size())));
  if (overflow_) {
    send(realtime::error_event("slow_consumer",
                               "The client read too slowly: the response was cancelled and its last deltas dropped."));
  }
  if (redirect_pending_) {
    redirect_pending_ = false;
    try {
      create_response(redirect_overrides_);
    } catch (const EventError& e) {
      send(realtime::error_event(e.code, e.message, "response.redirect"));
    }
  }
  after_response();
}

}  // namespace nexus::server
