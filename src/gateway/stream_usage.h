// Token usage of the responses the gateway relays, for the per-tenant
// tokens-per-minute limits (tenant_limiter.h): prompt + completion tokens
// as the replica counted them, from its `usage` object.
//
//   non-streamed  the response body's "usage" (usage_of_body): chat's
//                 prompt/completion tokens, or the Responses and Messages
//                 APIs' input/output tokens (Anthropic's cache reads and
//                 writes added to its input tokens);
//   streamed      the gateway asks the replica for the usage chunk
//                 (`"stream_options": {"include_usage": true}` added to the
//                 request, with_stream_usage) and reads it from the stream's
//                 last data event before [DONE] (StreamUsageTap). When the
//                 client had not asked for it, the tap removes what the
//                 option added: that usage chunk (`"choices": []`) and the
//                 `"usage": null` that ends every other chunk, so the
//                 client gets the stream it asked for.
//   streamed Responses and Messages answers: their usage comes unasked, in
//                 response.completed / .incomplete / .failed (the
//                 response object's) and in message_delta (Nexus's is
//                 cumulative: input and output tokens); the tap reads the
//                 last one (after each event's `event:` line) and strips
//                 nothing.
// A stream cut before its usage chunk counts nothing (the replica's count
// never arrived). The replica's JSON is read with the process's nesting
// limit (util/json_depth.h); a text past it counts nothing either.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace nexus::gateway {

struct TokenUsage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
};

// The "usage" of a JSON response body; nullopt when it has none.
std::optional<TokenUsage> usage_of_body(std::string_view body);

// For a request body with "stream": true (`doc`, the body as parsed under
// util/json_depth.h's bound; a discarded value when not JSON): include_usage
// set in `doc`, the new body, and whether the client had set it itself.
// nullopt when the body is not a JSON object streaming (`doc` left as it is).
struct StreamUsageRequest {
  std::string body;
  bool client_asked = false;
};
std::optional<StreamUsageRequest> with_stream_usage(nlohmann::ordered_json& doc);

// Splits a relayed SSE stream into whole events (a partial event is held
// until its blank line, so the client still gets each event as soon as it
// is complete), reads the usage chunk, and strips what include_usage added
// when `strip` (the client had not asked for it).
//
// Bounded: each byte is scanned for the blank line once (a partial event
// is searched from where the last read ended), and at most `max_event`
// bytes of one event are held. An event longer than that (a replica's
// events are a few hundred bytes; a chunk with top-20 logprobs a few KiB)
// cannot be followed: the tap is then overflowed() and passes nothing
// more, and the caller ends the stream.
class StreamUsageTap {
 public:
  static constexpr size_t kMaxEventBytes = 1 << 20;
  explicit StreamUsageTap(bool strip, size_t max_event = kMaxEventBytes) : strip_(strip), max_event_(max_event) {}
  // The bytes to relay now for `bytes` read from the replica.
  std::string feed(std::string_view bytes);
  // An event passed max_event: what was held is dropped, feed() returns "".
  bool overflowed() const { return overflowed_; }
  // At the end of the stream: whatever was held back (a last event without
  // its blank line, relayed as it came).
  std::string flush();
  const std::optional<TokenUsage>& usage() const { return usage_; }

 private:
  std::string event(std::string_view ev);  // one whole event, blank line included

  bool strip_;
  size_t max_event_;
  bool overflowed_ = false;
  std::string held_;
  size_t scanned_ = 0;  // held_'s bytes searched for the blank line already
  std::optional<TokenUsage> usage_;
};

}  // namespace nexus::gateway
