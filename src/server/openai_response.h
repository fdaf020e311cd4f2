// openai_response: engine events -> OpenAI response bodies.
//
// Non-streaming (API reference, "The completion object" / "The chat
// completion object"):
//   {"id":"cmpl-…"|"chatcmpl-…","object":"text_completion"|"chat.completion",
//    "created":<unix s>,"model":…,"choices":[{"index":0,"text":…|"message":{"role":"assistant",
//    "content":…},"finish_reason":"stop"|"length","logprobs":null}],
//    "usage":{"prompt_tokens","completion_tokens","total_tokens"},"timings":{…}}
// Streaming: SSE events (sse.h) of chunk objects ("text_completion" /
// "chat.completion.chunk"). Chat opens with a delta {"role":"assistant",
// "content":""}; each non-empty piece of text is one chunk; the last chunk has
// finish_reason and an empty delta (text ""); with include_usage every chunk
// carries "usage":null and one more chunk with "choices":[] and the usage
// follows; then `data: [DONE]`.
// "timings" (non-standard, like llama.cpp's) sits on the final object / the
// finish_reason chunk: queue_ms, prefill_ms, ttft_ms, decode_ms,
// decode_tokens_per_s.
// logprobs (when the request asked: ResponseMeta::logprobs >= 0): chat
// choices carry {"content": [{"token", "logprob", "bytes", "top_logprobs":
// [{"token", "logprob", "bytes"}]}], "refusal": null}; completions carry
// {"tokens", "token_logprobs", "top_logprobs": [{token: logprob}] (the k
// most likely plus the sampled one, as OpenAI's legacy field), "text_offset"
// (byte offsets of the pieces in their concatenation)}. "token" is the
// token's text (invalid UTF-8, as in a byte-fallback piece, replaced by
// U+FFFD) and "bytes" its raw bytes. Streaming: each chunk carries the
// logprobs of the tokens sampled since the previous chunk, so a token whose
// text was withheld (a partial character, a possible stop string) is reported
// with the next chunk or the finish_reason chunk, never dropped.
// A generation that fails (FinishReason::Error) becomes a 500 server_error
// body, or, once streaming has begun, an SSE event {"error":{…}} + [DONE].
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "server/core/output.h"
#include "server/openai_request.h"
#include "server/tool_calls/stream.h"

namespace nexus::server {

struct ResponseMeta {
  Endpoint endpoint = Endpoint::Completions;
  bool stream = false;
  bool include_usage = false;
  std::string model;
  std::string id;        // "cmpl-…" / "chatcmpl-…" (make_response_id)
  int64_t created = 0;   // unix seconds
  int32_t logprobs = -1; // SamplingParams::logprobs of the request (-1: none)
  // Chat with tools: the output is parsed for tool calls (tool_calls/stream.h
  // gives the message, the deltas and finish_reason "tool_calls"); null: none.
  std::shared_ptr<const tool_calls::ToolCallSetup> tools;
  // One choice of several (n > 1, choices_formatter.h): its "index", and
  // `partial`: its stream ends after its finish_reason chunk (or error
  // event), without the usage chunk or [DONE], which the ChoicesFormatter
  // writes once every choice has ended.
  int32_t index = 0;
  bool partial = false;
  // echo (non-streaming completions): the text before the completion's;
  // the prompt's logprobs come with the first event (prompt_logprobs: a
  // NaN logprob, the first token's, is null, its top_logprobs null).
  std::string echo_text;
};

// OpenAI chat's renderings of the neutral output (core/output.h): a chunk's
// `delta` and the choice's `message` ({"role": "assistant", "content": text
// | null (calls and no text), "tool_calls": [{"id", "type": "function",
// "function": {"name", "arguments"}}]}).
nlohmann::json chat_delta(const OutputDelta& d);
nlohmann::json chat_message(const OutputMessage& m);

// {"prompt_tokens", "completion_tokens", "total_tokens",
//  "prompt_tokens_details": {"cached_tokens"}}.
nlohmann::json usage_json(const Usage& u);

// A fresh id with the endpoint's prefix and 24 random hex digits.
std::string make_response_id(Endpoint endpoint);

class CompletionFormatter {
 public:
  explicit CompletionFormatter(ResponseMeta meta);

  // Streaming only: what to send right after the headers (chat's role chunk).
  std::string stream_preamble() const;

  // Streaming: the SSE bytes for this event (possibly ""); the done event
  // yields the closing chunks and [DONE]. Non-streaming: "" until done, then
  // the whole JSON body.
  std::string on_event(const GenerationEvent& ev);

  int status() const { return status_; }  // 200, or 400 / 500 after an Error event (non-streaming)
  const ResponseMeta& meta() const { return meta_; }

 private:
  // `delta` (chat, not the finish chunk): the delta object instead of {"content": text}.
  std::string chunk(const std::string& text, const char* finish_reason, const GenerationEvent* last,
                    const nlohmann::json* delta = nullptr);
  // The choice's "logprobs" value for the pending tokens (null when the
  // request asked none), which it then clears.
  nlohmann::json take_logprobs();

  ResponseMeta meta_;
  OutputStream output_;  // tool calls parsed when meta_.tools
  std::string text_;  // non-streaming accumulation
  std::vector<TokenLogprob> pending_;  // logprobs not yet sent
  int64_t piece_offset_ = 0;           // completions' text_offset
  int status_ = 200;
};

}  // namespace nexus::server
