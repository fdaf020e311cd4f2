// MessagesFormatter: one generation -> Anthropic's Messages response
// (Anthropic's API reference, "Messages" and "Streaming Messages"), from the
// neutral output (core/output.h).
//
// The message: {"id": "msg_…", "type": "message", "role": "assistant",
// "model", "content": [{"type": "text", "text"} | {"type": "tool_use", "id",
// "name", "input": object}], "stop_reason": "end_turn" | "max_tokens" |
// "stop_sequence" | "tool_use", "stop_sequence": string | null, "usage":
// {"input_tokens", "output_tokens", "cache_read_input_tokens",
// "cache_creation_input_tokens": 0}}. As Anthropic counts them,
// input_tokens leaves out the prompt tokens read from the cache
// (cache_read_input_tokens); their sum is the prompt. A tool call cut by
// max_tokens is left out of the non-streamed content (stop_reason
// max_tokens says the output was cut).
//
// Streamed, as SSE events with an `event:` line: message_start (usage with
// the prompt's size), ping, per block content_block_start,
// content_block_delta (text_delta | input_json_delta)...,
// content_block_stop (one block open at a time: text, then each call; text
// after a call opens a new block), then message_delta ({"stop_reason",
// "stop_sequence"}, usage) and message_stop. A failure is an `error` event
// ({"type": "error", "error": {"type", "message"}}).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "server/core/output.h"
#include "server/core/response_formatter.h"
#include "server/tool_calls/stream.h"

namespace nexus::server {

class MessagesFormatter final : public ResponseFormatter {
 public:
  // `prompt_tokens`: the rendered prompt's length (message_start's usage).
  MessagesFormatter(bool stream, std::string model, int64_t prompt_tokens,
                    std::shared_ptr<const tool_calls::ToolCallSetup> tools);

  bool stream() const override { return stream_; }
  std::string stream_preamble() override;
  std::string on_event(const GenerationEvent& ev, int32_t index) override;
  bool finished() const override { return finished_; }
  int status() const override { return status_; }
  HttpReply error_reply(const ApiError& e) const override;
  std::string stream_error(const ApiError& e) const override;

 private:
  std::string close_block();
  nlohmann::json message(bool final) const;

  std::string id_;
  std::string model_;
  int64_t prompt_tokens_ = 0;
  bool stream_ = false;
  OutputStream output_;
  int block_ = -1;              // index of the open block, -1 when none
  bool block_is_text_ = false;
  int next_block_ = 0;
  Usage usage_;
  bool finished_ = false;
  int status_ = 200;
};

}  // namespace nexus::server
