// ResponsesFormatter: one generation -> the Responses API's response object
// (non-streamed) or its SSE events (OpenAI's API reference, "Streaming
// events"; the official SDK's ResponseStreamEvent types), from the neutral
// output (core/output.h).
//
// The response object: {"id": "resp_…", "object": "response", "created_at",
// "status": "completed" | "incomplete" | "failed" | "in_progress", "error",
// "incomplete_details": null | {"reason": "max_output_tokens"}, "instructions",
// "max_output_tokens", "model", "output": [items], "parallel_tool_calls",
// "previous_response_id", "reasoning", "store", "temperature", "text",
// "tool_choice", "tools", "top_p", "truncation": "disabled", "usage":
// {"input_tokens", "input_tokens_details": {"cached_tokens"}, "output_tokens",
// "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens"},
// "metadata", "user": null}.
// Output items: the text as {"id": "msg_…", "type": "message", "role":
// "assistant", "status", "content": [{"type": "output_text", "text",
// "annotations": []}]}, each tool call as {"id": "fc_…", "type":
// "function_call", "call_id", "name", "arguments" (a JSON string),
// "status"}. An item cut by max_output_tokens has status "incomplete",
// and so has the response.
//
// Streamed events, each with "type" and a "sequence_number" counting from
// 0: response.created, response.in_progress; per item
// response.output_item.added, then for text response.content_part.added,
// response.output_text.delta..., response.output_text.done,
// response.content_part.done, for a call
// response.function_call_arguments.delta..., .done; response.output_item.done
// (items close in output order once the output has ended: text may still
// follow a call until then); then response.completed, response.incomplete
// or response.failed (its response.error: {"code", "message"}).
// An error outside the generation (queue full, shutdown) in a stream is a
// response.failed too (Codex retries those; context_length_exceeded is a
// 400 before any event).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/core/output.h"
#include "server/core/response_formatter.h"
#include "server/responses/response_store.h"
#include "server/responses/responses_request.h"
#include "server/tool_calls/stream.h"

namespace nexus::server {

// "resp_" + 48 hex digits (and "msg_", "fc_" for items).
std::string make_responses_id(const char* prefix);

class ResponsesFormatter final : public ResponseFormatter {
 public:
  // How events leave: SSE bytes from on_event(), or (the WebSocket mode)
  // one JSON text per event, taken with take_frames().
  enum class Framing { Sse, Frames };
  // `store`: where the finished response goes when req.store (may be null);
  // `connection`: a WebSocket connection's own store, which keeps its last
  // response whatever req.store says (may be null).
  ResponsesFormatter(const ResponsesRequest& req, std::string model, std::shared_ptr<const tool_calls::ToolCallSetup> tools,
                     ResponseStore* store, ResponseStore* connection = nullptr, Framing framing = Framing::Sse);
  std::vector<std::string> take_frames() { return std::exchange(frames_, {}); }

  const std::string& id() const { return id_; }
  bool stream() const override { return stream_; }
  std::string stream_preamble() override;
  std::string on_event(const GenerationEvent& ev, int32_t index) override;
  bool finished() const override { return finished_; }
  int status() const override { return status_; }
  HttpReply error_reply(const ApiError& e) const override;
  std::string stream_error(const ApiError& e) const override;

  // The response object now (status in_progress until the output ends).
  nlohmann::json response() const;
  // The events of a response that produced nothing (WebSocket mode's
  // generate: false): created, then completed with `usage`.
  std::string events_without_output(const Usage& usage);

 private:
  struct Item {
    std::string id;
    bool is_call = false;
    size_t call = 0;  // OutputMessage::calls index
  };
  std::string event(nlohmann::json ev);
  std::string open_text();
  nlohmann::json item_json(const Item& it) const;
  void save();

  std::string id_;
  std::string model_;
  int64_t created_at_ = 0;
  bool stream_ = false;
  nlohmann::json echo_;  // the request's fields the response object repeats
  OutputStream output_;
  std::vector<Item> items_;
  int text_item_ = -1;  // index in items_ of the message item, -1 before any text
  int64_t sequence_ = 0;
  std::string status_name_ = "in_progress";
  nlohmann::json error_ = nullptr;
  Usage usage_;
  bool finished_ = false;
  int status_ = 200;
  ResponseStore* store_ = nullptr;
  ResponseStore* connection_ = nullptr;
  Framing framing_ = Framing::Sse;
  std::vector<std::string> frames_;
  nlohmann::ordered_json input_items_;
  std::vector<ChatMessage> transcript_;
};

}  // namespace nexus::server
