// ResponseFormatter: one protocol's rendering of one generation's events
// into the bytes of its HTTP response. The HTTP session (http_session.h)
// owns the transport (headers, chunking, the bounded output queue, the
// client's departure) and knows nothing of the protocols' shapes; each
// front-end (OpenAI chat and completions: choices_formatter.h; Responses:
// responses/; Anthropic Messages: anthropic/) implements this.
//
// Threading: every call comes from the session's strand, in event order.
#pragma once

#include <cstdint>
#include <string>

#include "engine/engine.h"
#include "server/api_error.h"
#include "server/http_reply.h"

namespace nexus::server {

class ResponseFormatter {
 public:
  virtual ~ResponseFormatter() = default;

  // An SSE stream (text/event-stream) rather than one body at the end.
  virtual bool stream() const = 0;
  // Streaming only: what to send right after the headers ("" for none).
  virtual std::string stream_preamble() = 0;
  // The bytes for event `ev` of generation `index` (the choice; 0 for
  // protocols with one output). Non-streaming: "" until finished(), then
  // the whole body.
  virtual std::string on_event(const GenerationEvent& ev, int32_t index) = 0;
  // Every generation has ended (or one failed): the response is complete.
  virtual bool finished() const = 0;
  // The non-streamed body's HTTP status (200, or 4xx/5xx after an error).
  virtual int status() const = 0;
  // An error met outside the generation (the queue is full, the server is
  // shutting down), in the protocol's own shape: the whole reply before a
  // stream began, else the bytes that end the stream.
  virtual HttpReply error_reply(const ApiError& e) const = 0;
  virtual std::string stream_error(const ApiError& e) const = 0;
};

}  // namespace nexus::server
