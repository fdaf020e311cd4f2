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
// A generation that fails (FinishReason::Error) becomes a 500 server_error
// body, or, once streaming has begun, an SSE event {"error":{…}} + [DONE].
#pragma once

#include <cstdint>
#include <string>

#include "engine/engine.h"
#include "server/openai_request.h"

namespace nexus::server {

struct ResponseMeta {
  Endpoint endpoint = Endpoint::Completions;
  bool stream = false;
  bool include_usage = false;
  std::string model;
  std::string id;        // "cmpl-…" / "chatcmpl-…" (make_response_id)
  int64_t created = 0;   // unix seconds
};

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

  int status() const { return status_; }  // 200, or 500 after an Error event (non-streaming)
  const ResponseMeta& meta() const { return meta_; }

 private:
  std::string chunk(const std::string& text, const char* finish_reason, const GenerationEvent* last) const;

  ResponseMeta meta_;
  std::string text_;  // non-streaming accumulation
  int status_ = 200;
};

}  // namespace nexus::server
