// ResponsesWsSession: the Responses API's WebSocket mode, GET /v1/responses
// with an Upgrade (what Codex CLI uses first; its `openai-beta:
// responses_websockets=DATE` header is accepted whatever the date). The
// transport is WsSession's (ws_session.h): message limit, flood rules,
// pings, back-pressure, the close.
//
// Client messages, one JSON text frame each:
//   {"type": "response.create", ...the fields of POST /v1/responses...}
//       (responses_request.h; plus "generate": false: the input is
//       prefilled and kept, and the answer is response.created then
//       response.completed with an empty output: an agent's preamble is
//       ready before its first turn)
//   {"type": "response.cancel"}  the running response ends now
//       (response.failed with code "cancelled"... as realtime's interrupt)
// Server messages: the events of the streamed response
// (responses_formatter.h), one per text frame; errors as {"type": "error",
// "status": HTTP status, "error": {"type", "code", "message", "param"}},
// plus "event": "response.create" when the error refuses one (400 for the client's mistakes: a response.create while one runs is
// response_in_progress, an unknown type, invalid JSON; a status of 500 or
// more (server_shutting_down is 503) tells Codex to retry).
//
// The connection keeps its last response (transcript) whatever `store` says,
// as OpenAI's mode does, and one engine session (GenerationRequest::session)
// for all its responses: the engine keeps the KV of the last one, so a
// response.create with previous_response_id naming it prefills only what
// follows the kept tokens (usage.input_tokens_details.cached_tokens counts
// the rest). A previous_response_id of another connection continues from
// the server's store when it is stored there, else 400
// previous_response_not_found (Codex then resends the whole input).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "server/responses/response_store.h"
#include "server/responses/responses_formatter.h"
#include "server/ws_session.h"

namespace nexus::server {

class ResponsesWsSession final : public WsSession {
 public:
  ResponsesWsSession(boost::asio::ip::tcp::socket socket, ServerContext& ctx);
  ~ResponsesWsSession() override;
  void on_engine_event(const GenerationEvent& ev) override;

 private:
  // A response.create, parsed and its prompt built (on the TokenizerPool
  // for a large message), or the error that stopped it.
  struct Prepared {
    std::unique_ptr<ResponsesFormatter> formatter;
    GenerationRequest request;
    bool generate = true;
    bool answers_create = false;  // the message was a response.create (its error says so)
    std::optional<ApiError> error;
  };
  std::shared_ptr<ResponsesWsSession> self() { return std::static_pointer_cast<ResponsesWsSession>(shared_from_this()); }
  void on_text(std::string_view text) override;
  std::string error_message(const std::string& code, const std::string& message) const override;
  bool busy() const override { return running_ || preparing_; }
  void on_backlog() override;
  void on_shutdown() override;
  bool on_closing() override;
  void on_gone() override;

  Prepared prepare(std::string_view text);  // any thread (the stores lock for themselves)
  void start_response(Prepared p);
  // `answers_create`: the error refuses a response.create; it then names it
  // ("event": "response.create"), so a relay that watches the connection
  // (the gateway's, gateway/responses_transcript.h) pairs each
  // response.create with its answer: response.created or this error.
  void send_error(const ApiError& e, bool answers_create = false);
  void send_frames();

  const uint64_t engine_session_;
  ResponseStore connection_store_;  // this connection's last response
  std::string last_id_;
  std::unique_ptr<ResponsesFormatter> formatter_;
  std::shared_ptr<WsRelay> relay_;
  std::shared_ptr<RequestHandle> handle_;
  bool running_ = false;
  bool preparing_ = false;
  bool generate_ = true;
};

}  // namespace nexus::server
