#include "loadgen/ws_transport.h"

#include <optional>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>

#include "loadgen/api_wire.h"
#include "loadgen/deadline.h"

namespace nexus::loadgen {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = net::ip::tcp;
using nlohmann::json;

namespace {

constexpr auto kCloseGrace = std::chrono::milliseconds(1000);  // closing handshake after a session

// "code: message" of an `error` event's error object.
std::string event_error_text(const json& ev) {
  const json e = ev.value("error", json::object());
  if (!e.is_object()) return e.dump();
  std::string code = e.contains("code") && e["code"].is_string() ? e["code"].get<std::string>() : "error";
  std::string msg = e.contains("message") && e["message"].is_string() ? e["message"].get<std::string>() : e.dump();
  return code + ": " + msg;
}

}  // namespace

std::string realtime_target(const ServerUrl& server) { return server.base_path + "/v1/realtime"; }
std::string responses_ws_target(const ServerUrl& server) { return server.base_path + "/v1/responses"; }

struct WsTransport::Impl {
  HttpTransportOptions opts;
  net::io_context ioc;
  tcp::resolver resolver{ioc};
  std::optional<ClientConnection> conn;                    // made once opts is set (TLS context)
  std::optional<websocket::stream<ClientConnection&>> ws;  // fresh per connection
  beast::flat_buffer buf;
  bool connected = false;
  uint64_t opened = 0;
  // What the server's conversation holds: which bench session, and how much
  // of its history (chat messages incl. replies, or prompt characters).
  uint64_t session = 0;
  size_t held_messages = 0, held_chars = 0;
  std::string last_response;  // Responses: the id the next turn continues

  // One async operation, bounded by `deadline` (loadgen/deadline.h).
  template <class Start>
  beast::error_code run(Clock::time_point deadline, Start&& start) {
    return run_until_deadline(ioc, deadline, std::forward<Start>(start), [&] {
      resolver.cancel();
      drop();
    });
  }

  void drop() {
    if (conn) conn->close();
    buf.consume(buf.size());
    connected = false;
  }

  // The closing handshake (the server ends the session and frees its KV).
  void close_gracefully() {
    if (!connected) return;
    run(Clock::now() + kCloseGrace, [&](auto h) { ws->async_close(websocket::close_code::normal, h); });
    drop();
  }

  // Connects and upgrades. Fills r.error/http_status on failure.
  bool open(Clock::time_point deadline, RequestResult& r, const std::string& target) {
    const auto t0 = Clock::now();
    if (!conn) conn.emplace(ioc, opts.tls);
    conn->close();
    conn->reset();  // fresh TLS state
    ws.emplace(*conn);
    buf.consume(buf.size());
    tcp::resolver::results_type endpoints;
    beast::error_code ec = run(deadline, [&](auto h) {
      resolver.async_resolve(opts.server.host, opts.server.port,
                             [h, &endpoints](beast::error_code e, tcp::resolver::results_type res) mutable {
                               endpoints = std::move(res);
                               h(e);
                             });
    });
    if (!ec) ec = run(deadline, [&](auto h) { net::async_connect(conn->tcp(), endpoints, h); });
    if (!ec && conn->tls()) {  // wss://
      if (!conn->set_server_name(opts.server.host)) ec = net::error::invalid_argument;
      if (!ec) ec = run(deadline, [&](auto h) { conn->async_handshake(h); });
    }
    if (ec) {
      drop();
      r.error = ec == beast::error::timeout ? ErrorKind::Timeout : ErrorKind::Connect;
      r.error_message = "connect to " + opts.server.to_string() + ": " + ec.message();
      return false;
    }
    ++opened;
    beast::error_code ignored;
    conn->tcp().set_option(tcp::no_delay(true), ignored);  // small events go out at once
    const std::string key = opts.api_key;
    ws->set_option(websocket::stream_base::decorator([key](websocket::request_type& req) {
      req.set(http::field::user_agent, "nexus-bench");
      if (!key.empty()) req.set(http::field::authorization, "Bearer " + key);
    }));
    websocket::response_type res;
    const std::string host = opts.server.host + ":" + opts.server.port;
    ec = run(deadline, [&](auto h) { ws->async_handshake(res, host, target, h); });
    r.http_status = static_cast<int>(res.result_int());
    if (ec) {
      drop();
      if (ec == beast::error::timeout) {
        r.error = ErrorKind::Timeout;
        r.error_message = "timed out during the WebSocket upgrade";
      } else if (ec == websocket::error::upgrade_declined && r.http_status != 0) {
        r.error = ErrorKind::HttpStatus;
        r.error_message = "upgrade to WebSocket declined: " + res.body().substr(0, 200);
      } else {
        r.error = ErrorKind::Connection;
        r.error_message = "WebSocket upgrade of " + target + ": " + ec.message();
      }
      return false;
    }
    connected = true;
    r.connect_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    return true;
  }

  // The session-wide settings: model, ignore_eos, then the extra body.
  json session_settings(const RequestSpec& spec) const {
    json s = json::object();
    if (!spec.model.empty()) s["model"] = spec.model;
    if (spec.ignore_eos) s["ignore_eos"] = true;
    if (opts.extra_body.is_object() && !opts.extra_body.empty()) s.merge_patch(opts.extra_body);
    return s;
  }

  // The input.append events for what the server does not hold yet; an
  // error message when the request cannot be expressed in the protocol.
  std::optional<std::string> new_input(const RequestSpec& spec, bool fresh, std::vector<json>& events) const {
    if (message_api(spec.api)) {
      const size_t from = fresh ? 0 : held_messages;
      if (!spec.messages.is_array() || from > spec.messages.size()) return "the chat history does not extend the session's";
      for (size_t i = from; i < spec.messages.size(); ++i) {
        const json& m = spec.messages[i];
        const std::string role = m.value("role", "");
        if (role != "user" && role != "assistant" && role != "system" && role != "tool") {
          return "a realtime session takes user/assistant/system/tool messages as input, not \"" + role + "\"";
        }
        if (!m.contains("content") || !m["content"].is_string()) return "message content must be a string";
        events.push_back({{"type", "input.append"}, {"message", {{"role", role}, {"content", m["content"]}}}});
      }
    } else {
      const size_t from = fresh ? 0 : held_chars;
      if (from > spec.prompt.size()) return "the prompt does not extend the session's text";
      events.push_back({{"type", "input.append"}, {"text", spec.prompt.substr(from)}});
    }
    return std::nullopt;
  }

  // Responses: one response.create carrying the messages from `from` on,
  // continuing the connection's last response when there is one.
  json responses_create(const RequestSpec& spec, size_t from) const {
    json ev = {{"type", "response.create"},
               {"input", responses_input(spec.messages, from)},
               {"max_output_tokens", spec.max_tokens},
               {"store", false}};
    if (from > 0 && !last_response.empty()) ev["previous_response_id"] = last_response;
    if (!spec.model.empty()) ev["model"] = spec.model;
    if (spec.ignore_eos) ev["ignore_eos"] = true;
    if (opts.extra_body.is_object() && !opts.extra_body.empty()) ev.merge_patch(opts.extra_body);
    return ev;
  }

  // Writes the events back to back; false (r's error set, the connection
  // dropped) on failure.
  bool send(Clock::time_point deadline, const std::vector<json>& events, RequestResult& r) {
    ws->text(true);
    for (const json& ev : events) {
      const std::string text = ev.dump();
      const beast::error_code ec = run(deadline, [&](auto h) { ws->async_write(net::buffer(text), h); });
      if (!ec) continue;
      drop();
      r.error = ec == beast::error::timeout ? ErrorKind::Timeout : ErrorKind::Connection;
      r.error_message = (ec == beast::error::timeout ? "timed out sending " : "sending ") +
                        ev["type"].get<std::string>() + (ec == beast::error::timeout ? "" : ": " + ec.message());
      return false;
    }
    return true;
  }

  // Reads one response's events to its end (realtime: response.done;
  // Responses: response.completed/.incomplete), recording text arrivals and
  // usage; false (r's error set, the connection dropped) on failure.
  bool read_response(Clock::time_point deadline, bool responses, RequestResult& r) {
    auto fail = [&](ErrorKind kind, const std::string& msg) {
      drop();
      r.error = kind;
      r.error_message = msg;
      return false;
    };
    for (;;) {
      buf.consume(buf.size());
      const beast::error_code ec = run(deadline, [&](auto h) { ws->async_read(buf, h); });
      const auto now = Clock::now();  // arrival time of this message
      if (ec == beast::error::timeout) return fail(ErrorKind::Timeout, "timed out while streaming the response");
      if (ec == websocket::error::closed) {
        return fail(ErrorKind::Connection, "the server closed the session (code " +
                                               std::to_string(static_cast<int>(ws->reason().code)) + ")");
      }
      if (ec) return fail(ErrorKind::Connection, "reading the response: " + ec.message());
      if (!ws->got_text()) return fail(ErrorKind::Protocol, "a binary message from the server");
      const std::string text = beast::buffers_to_string(buf.data());
      const json ev = json::parse(text, nullptr, false);
      if (!ev.is_object() || !ev.contains("type") || !ev["type"].is_string())
        return fail(ErrorKind::Protocol, "not a JSON event: " + text.substr(0, 200));
      const std::string type = ev["type"];
      if (type == "error") return fail(ErrorKind::Server, event_error_text(ev));
      if (responses) {
        const ChunkInfo c = interpret_responses_event(text);
        if (!c.text.empty()) {
          r.token_times.push_back(now);
          r.text += c.text;
        }
        if (!c.done) continue;
        if (c.error) return fail(ErrorKind::Server, "response failed: " + *c.error);
        r.prompt_tokens = c.prompt_tokens;
        r.completion_tokens = c.completion_tokens;
        r.cached_tokens = c.cached_tokens;
        last_response = ev["response"].value("id", "");
        return true;
      }
      if (type == "response.delta") {
        const json& t = ev.contains("text") ? ev["text"] : json();
        if (t.is_string() && !t.get_ref<const std::string&>().empty()) {
          r.token_times.push_back(now);
          r.text += t.get_ref<const std::string&>();
        }
        continue;
      }
      if (type != "response.done") continue;  // session.created/.updated, response.created
      const json resp = ev.value("response", json::object());
      if (!resp.is_object()) return fail(ErrorKind::Protocol, "response.done without a response object");
      if (const json u = resp.value("usage", json::object()); u.is_object()) {
        r.prompt_tokens = json_count(u, "prompt_tokens");
        r.completion_tokens = json_count(u, "completion_tokens");
        r.cached_tokens = json_count(u, "cached_tokens");
      }
      if (auto t = resp.find("ttft_ms"); t != resp.end() && t->is_number()) r.server_ttft_ms = t->get<double>();
      const std::string finish = resp.value("finish_reason", "");
      if (finish == "error" || finish == "cancelled") {
        const std::string why = resp.contains("error") && resp["error"].is_string() ? resp["error"].get<std::string>()
                                                                                     : "finish_reason " + finish;
        return fail(ErrorKind::Server, "response ended: " + why);
      }
      return true;
    }
  }
};

WsTransport::WsTransport(HttpTransportOptions opts) : impl_(std::make_unique<Impl>()) {
  impl_->opts = std::move(opts);
}

WsTransport::~WsTransport() { impl_->close_gracefully(); }

uint64_t WsTransport::connections_opened() const { return impl_->opened; }

RequestResult WsTransport::run_request(const RequestSpec& spec) {
  Impl& m = *impl_;
  RequestResult r;
  r.start = Clock::now();
  const Clock::time_point deadline = r.start + m.opts.timeout;
  auto fail = [&](ErrorKind kind, const std::string& msg) {
    m.drop();
    r.end = Clock::now();
    r.error = kind;
    r.error_message = msg;
    return r;
  };

  // A new bench session never sees another's history: fresh connection.
  const bool fresh = !m.connected || spec.turn == 0 || spec.session != m.session;
  if (fresh) {
    m.close_gracefully();
    if (!m.open(deadline, r, spec.api == Api::Responses ? responses_ws_target(m.opts.server) : realtime_target(m.opts.server))) {
      r.end = Clock::now();
      return r;
    }
  } else {
    r.reused_connection = true;
    r.http_status = 101;
  }
  const bool responses = spec.api == Api::Responses;
  if (responses && fresh && spec.warm_up) {
    // Codex's warm-up: the preamble prefilled before the first turn, which
    // then continues it. Its time is not the turn's.
    size_t n = 0;
    while (n < spec.messages.size() && spec.messages[n].value("role", "") == "system") ++n;
    json warm = m.responses_create(spec, 0);
    warm["input"] = responses_input(json(spec.messages.begin(), spec.messages.begin() + static_cast<std::ptrdiff_t>(n)));
    warm["generate"] = false;
    RequestResult w;
    if (!m.send(deadline, {warm}, w) || !m.read_response(deadline, true, w)) return fail(w.error, "warm-up: " + w.error_message);
    m.held_messages = n;
    r.start = Clock::now();
  }
  std::vector<json> events;
  if (responses) {
    if (fresh && !spec.warm_up) m.last_response.clear();
    events.push_back(m.responses_create(spec, fresh && !spec.warm_up ? 0 : m.held_messages));
  } else {
    if (fresh) events.push_back({{"type", "session.update"}, {"session", m.session_settings(spec)}});
    if (auto bad = m.new_input(spec, fresh, events)) return fail(ErrorKind::Protocol, *bad);
    events.push_back({{"type", "response.create"}, {"response", {{"max_tokens", spec.max_tokens}}}});
  }
  if (!m.send(deadline, events, r) || !m.read_response(deadline, responses, r)) {
    r.end = Clock::now();
    return r;
  }
  r.end = Clock::now();
  m.session = spec.session;
  if (message_api(spec.api)) {
    m.held_messages = spec.messages.size() + 1;  // + the reply the server kept
  } else {
    m.held_chars = spec.prompt.size() + r.text.size();
  }
  if (spec.turn + 1 >= spec.turns) m.close_gracefully();
  return r;
}

TransportFactory ws_transport_factory(HttpTransportOptions opts) {
  return [opts] { return std::make_unique<WsTransport>(opts); };
}

}  // namespace nexus::loadgen
