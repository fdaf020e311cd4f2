// RealtimeSession: one WebSocket connection of GET /v1/realtime (internal to
// HttpServer; HttpSession hands over the socket of an upgrade request).
// Protocol: realtime_protocol.h, docs/protocol.md.
//
// One session = one engine session id: the conversation is kept as token ids
// (realtime_conversation.h) and the engine keeps its KV between responses, so
// each turn prefills only its new input. At most one response runs at a time.
//
// The transport (output queue and back-pressure, the message limit, the
// pacing and cut-off of refused input, pings, the close) is WsSession's
// (ws_session.h); a slow reader's running response is cancelled, its
// remaining deltas are dropped, and response.done is followed by an `error`
// slow_consumer.
//
// Input bounds: an input.append (or response.redirect input) that would
// bring the pending input past the context's room in bytes -- (n_ctx - kept
// tokens - 1) * Backend::max_token_bytes(), input that cannot fit whatever
// it tokenizes to -- is refused with an `error` event input_too_large and
// never tokenized (one of TokenizerPool::kOffThreadBytes or more is measured
// by realtime_input_probe.h and, when it cannot fit, not even parsed); the
// input queued before it stays. A response.create whose
// pending input has TokenizerPool::kOffThreadBytes or more builds its prompt
// on the TokenizerPool (the session is "preparing": another response.create
// or a redirect gets response_in_progress, a cancel no_response), so an I/O
// thread never tokenizes a large input.
//
// A connection that goes away cancels its running response; the engine
// session is ended (its KV released) once no response runs any more.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/realtime_conversation.h"
#include "server/realtime_protocol.h"
#include "server/ws_session.h"

namespace nexus::server {

class RealtimeSession final : public WsSession {
 public:
  RealtimeSession(boost::asio::ip::tcp::socket socket, ServerContext& ctx);
  ~RealtimeSession() override;
  void on_engine_event(const GenerationEvent& ev) override;

 private:
  std::shared_ptr<RealtimeSession> self() { return std::static_pointer_cast<RealtimeSession>(shared_from_this()); }
  // WsSession's hooks.
  std::string subprotocol(const boost::beast::http::request<boost::beast::http::string_body>& req) const override;
  void on_open() override;
  void on_text(std::string_view text) override;
  std::string error_message(const std::string& code, const std::string& message) const override;
  bool busy() const override { return running_ || preparing_; }
  void on_backlog() override;
  void on_shutdown() override;
  bool on_closing() override;
  void on_gone() override;

  void handle_event(std::string_view text);
  // A message of TokenizerPool::kOffThreadBytes or more is parsed on the
  // pool (a 900 KB input.append costs milliseconds of JSON parsing, which
  // held up every other connection of this I/O thread); reading is held
  // until its event is handled, so events keep their order.
  void parse_off_thread(std::string text);
  // An input.append of that size is measured first (realtime_input_probe.h):
  // when it cannot fit, it gets its input_too_large here, unparsed, and
  // true comes back. A refused flood then costs the I/O thread one pass
  // over each message instead of a JSON parse on the cores the streams use.
  bool refuse_unparsed(std::string_view text);
  void dispatch(realtime::ClientEvent ev);
  void update_session(const nlohmann::json& s);
  // realtime::resolve_params with this server's model, context and priority cap.
  realtime::ResolvedParams resolve(const nlohmann::json& session, const nlohmann::json& overrides) const;
  void append_input(realtime::InputItem item);  // throws EventError input_too_large
  // Throws EventError input_too_large when `item_bytes` more input would not fit.
  void check_input_room(uint64_t item_bytes) const;
  void create_response(const nlohmann::json& overrides);
  void on_prompt_built(realtime::ResolvedParams p, std::vector<int32_t> prompt, std::optional<ApiError> error,
                       size_t n_items);
  void start_response(realtime::ResolvedParams p, std::vector<int32_t> prompt, size_t n_items);
  void finish_response(const GenerationEvent& ev);

  const uint64_t engine_session_;
  const std::string id_;

  realtime::Conversation conv_;
  nlohmann::json params_ = nlohmann::json::object();  // session-level <sampling> fields

  // The running response.
  std::shared_ptr<WsRelay> relay_;
  std::shared_ptr<RequestHandle> handle_;
  std::string response_id_;
  uint64_t responses_ = 0;
  bool running_ = false;
  bool preparing_ = false;  // its prompt is being built on the TokenizerPool
  bool return_tokens_ = false;
  bool overflow_ = false;                // cancelled for a slow reader
  bool redirect_pending_ = false;        // start a response when this one ends
  nlohmann::json redirect_overrides_;
};

}  // namespace nexus::server
