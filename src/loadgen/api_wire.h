// The wire form of a bench request for each API over HTTP + SSE: the path,
// the JSON body, and what one streamed event says (text, usage, the end, an
// error). The transports (http_transport.h, ws_transport.h) stay
// protocol-free; this is the one place that knows each API's shapes.
//
//   completions  POST /v1/completions       {"prompt", "max_tokens", "stream", "stream_options"}
//   chat         POST /v1/chat/completions  {"messages", "max_tokens", "stream", "stream_options"}
//       chunks: choices[0].text / .delta.content; usage in the last chunk;
//       the end: `data: [DONE]` (openai_stream.h).
//   responses    POST /v1/responses         {"input": message items, "max_output_tokens", "stream"}
//       events: response.output_text.delta (`delta`); the end:
//       response.completed / response.incomplete, whose response.usage has
//       input_tokens, output_tokens, input_tokens_details.cached_tokens;
//       response.failed and `error` are errors (OpenAI's API reference,
//       "Streaming events").
//   messages     POST /v1/messages          {"system", "messages", "max_tokens", "stream"}
//       events: content_block_delta with a text_delta; the usage of
//       message_start, then of message_delta (cumulative: input_tokens,
//       cache_read_input_tokens (the prompt is their sum), output_tokens);
//       the end: message_stop;
//       an `error` event is an error (Anthropic's "Streaming Messages").
// Every body has "model" when the request names one, "ignore_eos": true when
// asked (a Nexus/vLLM/llama.cpp extension), then `extra` merged last (RFC 7386).
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "loadgen/openai_stream.h"
#include "loadgen/url.h"
#include "loadgen/workload.h"

namespace nexus::loadgen {

nlohmann::json request_body(const RequestSpec& req, const nlohmann::json& extra);
// The API's path after the URL's base path.
std::string request_target(const ServerUrl& server, Api api);
// One SSE event's data. `done` marks the stream's end.
ChunkInfo interpret_event(Api api, std::string_view data);

// Message items of the Responses API for chat messages ({role, content}).
nlohmann::json responses_input(const nlohmann::json& messages, size_t from = 0);
// A Responses API streamed event (SSE data or a WebSocket message).
ChunkInfo interpret_responses_event(std::string_view data);

}  // namespace nexus::loadgen
