#include "server/realtime_session.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

#include "server/api_error.h"
#include "server/api_key.h"
#include "server/crash_fault.h"
#include "server/prompt_builder.h"
#include "server/realtime_input_probe.h"
#include "server/ws_frames.h"

namespace nexus::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = net::ip::tcp;
using nlohmann::json;
using realtime::EventError;

namespace {

// Engine session ids (GenerationRequest::session), unique per process.
std::atomic<uint64_t> g_next_session{1};

constexpr size_t kReadChunk = 64 << 10;  // bytes per read of a message
constexpr size_t kDrainChunk = 64 << 10;  // bytes per read while lingering

}  // namespace

// Carries engine events to the session's strand (see EventRelay in
// http_session.h, which this mirrors); detach() makes later events vanish.
class RealtimeRelay {
 public:
  RealtimeRelay(std::shared_ptr<PostGate> gate, std::shared_ptr<RealtimeSession> s)
      : gate_(std::move(gate)), session_(std::move(s)) {}
  void deliver(const GenerationEvent& ev) {  // engine thread
    std::lock_guard lock(gate_->mu);
    if (!gate_->open || !session_) return;
    // The final event hands the reference to the posted handler, so the
    // engine thread never destroys a session.
    std::shared_ptr<RealtimeSession> s = ev.done ? std::move(session_) : session_;
    auto ex = s->executor();
    net::post(ex, [s = std::move(s), ev] { s->on_engine_event(ev); });
  }
  void detach() {
    std::lock_guard lock(gate_->mu);
    session_.reset();
  }

 private:
  std::shared_ptr<PostGate> gate_;
  std::shared_ptr<RealtimeSession> session_;  // guarded by gate_->mu
};

RealtimeSession::RealtimeSession(tcp::socket socket, ServerContext& ctx)
    : registration_{ctx, this},
      ws_(std::move(socket)),
      ctx_(ctx),
      backend_(ctx.router.backend()),
      refused_input_(ctx.opts.body_limit),
      timer_(ws_.get_executor()),
      engine_session_(g_next_session.fetch_add(1, std::memory_order_relaxed)),
      id_(fmt::format("sess_{}", engine_session_)),
      conv_(backend_) {}

RealtimeSession::~RealtimeSession() = default;

RealtimeSession::Registration::~Registration() {
  std::lock_guard lock(ctx.mu);
  ctx.realtime_sessions.erase(self);
  ctx.cv.notify_all();
}

void RealtimeSession::start(http::request<http::string_body> req) {
  {
    std::lock_guard lock(ctx_.mu);
    ctx_.realtime_sessions.emplace(this, weak_from_this());
  }
  websocket::stream_base::timeout t{};
  t.handshake_timeout = std::chrono::seconds(30);
  // Beast pings after half the idle timeout of silence and gives up at the
  // full timeout.
  t.idle_timeout = 2 * ctx_.opts.ws_ping_interval;
  t.keep_alive_pings = true;
  ws_.set_option(t);
  // A client offering subprotocols (a browser presenting its API key so,
  // server/api_key.h) gets "realtime" selected; one offering none, none.
  const auto offered = req[http::field::sec_websocket_protocol];
  const bool realtime = offers_subprotocol(std::string_view(offered.data(), offered.size()), "realtime");
  ws_.set_option(websocket::stream_base::decorator([realtime](websocket::response_type& r) {
    r.set(http::field::server, "nexus");
    if (realtime) r.set(http::field::sec_websocket_protocol, "realtime");
  }));
  ws_.read_message_max(0);  // no limit: on_read enforces body_limit
  beast::get_lowest_layer(ws_).expires_never();  // the websocket timeouts apply instead
  // accept() builds the 101 response from `req` before it returns control,
  // but keep the request alive until the handler runs all the same.
  auto held = std::make_shared<http::request<http::string_body>>(std::move(req));
  ws_.async_accept(*held, [self = shared_from_this(), held](beast::error_code ec) { self->on_accept(ec); });
}

void RealtimeSession::shutdown() {
  net::post(executor(), [self = shared_from_this()] {
    if (self->lingering_) return self->end_linger();
    // The server is going away: no final event will be waited for.
    if (self->relay_) self->relay_->detach();
    if (self->running_) {  // fail(), now or after the close, then ends the engine session
      self->handle_->cancel();
      self->running_ = false;
      self->relay_.reset();
      self->handle_.reset();
    }
    if (!self->accepted_ || self->failed_ || self->closing_) return self->fail();
    // Say why, then close with 1001, "going away" (RFC 6455, section 7.4.1).
    self->send(realtime::error_event("server_shutting_down",
                                     "The server is stopping; open a session on another replica."));
    self->close_code_ = websocket::close_code::going_away;
    self->close_after_output_ = true;
    if (!self->writing_) self->begin_close();
  });
}

void RealtimeSession::on_accept(beast::error_code ec) {
  if (ec) return fail();
  accepted_ = true;
  send(realtime::session_created(id_, backend_.model_id(), backend_.n_ctx(), backend_.chat_template().origin()));
  do_read();
}

void RealtimeSession::do_read() {
  if (failed_ || cut_off_) return;
  if (const auto wait = refused_input_.wait_before_read(std::chrono::steady_clock::now()); wait.count() > 0) {
    timer_.expires_after(wait);
    timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (!ec && !self->closing_) self->do_read();  // a close under way reads for itself
    });
    return;
  }
  ws_.async_read_some(rbuf_, kReadChunk,
                      [self = shared_from_this()](beast::error_code ec, size_t n) { self->on_read(ec, n); });
}

void RealtimeSession::on_read(beast::error_code ec, size_t n) {
  if (failed_) return;
  // Closed by the peer, a ping unanswered, a reset: the session ends.
  if (ec) return fail();
  refused_input_.on_read(n);
  // The message limit is ours, not Beast's read_message_max: Beast 1.74
  // closes the socket without draining what the peer still sends, which
  // resets the connection and can destroy the close frame before the peer
  // reads it. An oversized message is refused once it passes the limit, the
  // rest of it discarded as it comes (and counted as refused), and the
  // session goes on.
  if (oversized_) {
    rbuf_.consume(rbuf_.size());
    if (refused_input_.refuse(std::chrono::steady_clock::now())) cut_off();
  } else if (rbuf_.size() > ctx_.opts.body_limit) {
    oversized_ = true;
    rbuf_.consume(rbuf_.size());
    refuse(realtime::error_event("message_too_large",
                                 fmt::format("A message exceeds the limit of {} bytes.", ctx_.opts.body_limit)));
  }
  if (!ws_.is_message_done()) return do_read();
  refused_input_.end_message();
  if (oversized_) {
    // Refused above.
  } else if (!ws_.got_text()) {
    refuse(realtime::error_event("binary_not_supported", "Binary messages are not supported; send JSON text."));
  } else if (!close_after_output_) {
    const auto data = rbuf_.cdata();
    const std::string_view text(static_cast<const char*>(data.data()), data.size());
    crash_if_faulty(text);  // (tests only: crash_fault.h)
    if (text.size() < TokenizerPool::kOffThreadBytes) {
      handle_event(text);
    } else if (!refuse_unparsed(text)) {
      std::string copy(text);
      rbuf_.consume(rbuf_.size());
      rbuf_.shrink_to_fit();
      return parse_off_thread(std::move(copy));  // reads on once its event is handled
    }
  }
  oversized_ = false;
  rbuf_.consume(rbuf_.size());
  rbuf_.shrink_to_fit();  // an idle session holds no read buffer
  do_read();
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
  auto job = [self = shared_from_this(), text = std::move(text)]() mutable {
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
      if (self->failed_) return;
      if (*error) self->refuse(realtime::error_event((*error)->code, (*error)->message, (*error)->event));
      else if (!self->close_after_output_) self->dispatch(std::move(**ev));
      self->do_read();
    });
  };
  if (!ctx_.tokenizer.post(std::move(job))) {
    send(realtime::error_event("server_shutting_down", "The server is shutting down; open a session on another replica."));
    do_read();
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
        close_after_output_ = true;
        redirect_pending_ = false;
        if (running_) return handle_->cancel();  // its response.done goes out first
        if (!writing_) begin_close();
        return;
    }
  } catch (const EventError& e) {
    refuse(realtime::error_event(e.code, e.message, e.event.empty() ? type : e.event));
  }
}

void RealtimeSession::refuse(std::string error_event) {
  send(std::move(error_event));
  if (refused_input_.refuse(std::chrono::steady_clock::now())) cut_off();
}

void RealtimeSession::cut_off() {
  if (cut_off_ || failed_) return;
  cut_off_ = true;  // do_read() reads no more
  ctx_.realtime_cut_off.fetch_add(1, std::memory_order_relaxed);
  if (ctx_.opts.log)
    ctx_.opts.log(fmt::format("realtime {} cut off: {:.0f} bytes of refused messages (input_flood, 1008)", id_,
                              refused_input_.refused()));
  send(realtime::error_event(
      "input_flood", fmt::format("This session sent {:.0f} bytes of messages that were refused, over the limit of "
                                 "{} (forgotten at {} bytes a minute): it is closed (1008). Open a new session.",
                                 refused_input_.refused(), refused_input_.budget(), ctx_.opts.body_limit)));
  close_code_ = websocket::close_code::policy_error;
  close_after_output_ = true;
  redirect_pending_ = false;
  if (running_) return handle_->cancel();  // its response.done goes out first, then the close
  if (!writing_ && !preparing_) begin_close();
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
  const bool queued = ctx_.tokenizer.post([self = shared_from_this(), snapshot, params, n_items]() mutable {
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
  if (failed_ || closing_) return;
  if (close_after_output_) {  // session.close (or shutdown) came meanwhile
    if (!writing_ && !running_) begin_close();
    return;
  }
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
  relay_ = std::make_shared<RealtimeRelay>(ctx_.gate, shared_from_this());
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
  if (failed_ || overflow_ || (ev.text.empty() && !return_tokens_)) return;
  send(realtime::response_delta(response_id_, ev.text, return_tokens_ ? std::optional(ev.token) : std::nullopt));
}

void RealtimeSession::finish_response(const GenerationEvent& ev) {
  running_ = false;
  relay_.reset();
  handle_.reset();
  conv_.on_response_end();
  if (failed_) return backend_.end_session(engine_session_);
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
  if (close_after_output_ && !writing_) begin_close();
}

void RealtimeSession::send(std::string msg) {
  if (failed_ || closing_) return;
  // A peer that sends but never reads would grow the queue without bound.
  if (out_bytes_ + msg.size() > 2 * ctx_.opts.max_pending_bytes) return fail();
  out_bytes_ += msg.size();
  out_.push_back(std::move(msg));
  if (running_ && !overflow_ && out_bytes_ > ctx_.opts.max_pending_bytes) {
    overflow_ = true;
    handle_->cancel();
  }
  if (!writing_) do_write();
}

void RealtimeSession::do_write() {
  writing_ = true;
  ws_.text(true);
  ws_.async_write(net::buffer(out_.front()),
                  [self = shared_from_this()](beast::error_code ec, size_t) { self->on_write(ec); });
}

void RealtimeSession::on_write(beast::error_code ec) {
  writing_ = false;
  if (failed_) return;
  if (ec) return fail();
  out_bytes_ -= out_.front().size();
  out_.pop_front();
  if (!out_.empty()) return do_write();
  if (close_after_output_ && !running_) begin_close();
}

void RealtimeSession::begin_close() {
  if (closing_ || failed_) return;
  if (cut_off_) return linger_close();
  closing_ = true;
  ws_.async_close(close_code_, [self = shared_from_this()](beast::error_code) {
    self->closing_ = false;
    self->fail();
  });
}

void RealtimeSession::linger_close() {
  closing_ = true;
  lingering_ = true;
  // Beast's idle timer would write pings; the stream is not used again.
  websocket::stream_base::timeout none{};
  none.handshake_timeout = websocket::stream_base::none();
  none.idle_timeout = websocket::stream_base::none();
  none.keep_alive_pings = false;
  ws_.set_option(none);
  auto frame = std::make_shared<const std::string>(encode_ws_close(static_cast<uint16_t>(close_code_), "input flood"));
  net::async_write(beast::get_lowest_layer(ws_).socket(), net::buffer(*frame),
                   [self = shared_from_this(), frame](beast::error_code ec, size_t) {
                     if (!self->lingering_) return;
                     if (ec) return self->end_linger();
                     beast::error_code ignored;
                     beast::get_lowest_layer(self->ws_).socket().shutdown(tcp::socket::shutdown_send, ignored);
                     self->timer_.expires_after(kLingerTime);
                     self->timer_.async_wait([self](beast::error_code e) {
                       if (!e && self->lingering_) self->end_linger();
                     });
                     self->drain_buf_ = std::make_unique_for_overwrite<char[]>(kDrainChunk);
                     self->linger_read();
                   });
}

void RealtimeSession::linger_read() {
  beast::get_lowest_layer(ws_).socket().async_read_some(
      net::buffer(drain_buf_.get(), kDrainChunk),
      [self = shared_from_this()](beast::error_code ec, size_t n) { self->on_linger_read(ec, n); });
}

void RealtimeSession::on_linger_read(beast::error_code ec, size_t n) {
  if (!lingering_) return;
  drained_ += n;
  // The peer's EOF (it read the close frame), an error, or enough drained.
  if (ec || drained_ >= kLingerMaxDrain) return end_linger();
  linger_read();
}

void RealtimeSession::end_linger() {
  lingering_ = false;
  closing_ = false;
  timer_.cancel();
  fail();  // closes the socket
}

void RealtimeSession::fail() {
  if (failed_) {
    if (!closing_) beast::get_lowest_layer(ws_).close();
    return;
  }
  failed_ = true;
  redirect_pending_ = false;
  timer_.cancel();  // a paced read's wait
  // A running response is cancelled; its final event ends the engine
  // session (ending it now could race with the KV being kept at its end).
  if (running_) handle_->cancel();
  else backend_.end_session(engine_session_);
  if (!closing_) beast::get_lowest_layer(ws_).close();
}

}  // namespace nexus::server
