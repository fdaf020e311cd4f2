// What one SSE `data:` payload of an OpenAI streaming response says.
//
// Completions chunks carry choices[0].text, chat chunks choices[0].delta.content
// (both are accepted for either endpoint); with stream_options.include_usage
// the last chunk before [DONE] has "usage" (and an empty "choices"), other
// chunks "usage": null. An error object ({"error": {...}}) may replace a chunk
// when generation fails after the 200 status was sent.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace nexus::loadgen {

struct ChunkInfo {
  bool done = false;                       // the stream's last event ("[DONE]"; api_wire.h for the others)
  std::string text;                        // generated text in this chunk ("" = none)
  std::optional<int64_t> prompt_tokens;    // from "usage"
  std::optional<int64_t> completion_tokens;
  std::optional<int64_t> cached_tokens;    // usage.prompt_tokens_details.cached_tokens
  std::optional<std::string> error;        // error message, for an error payload
  bool malformed = false;                  // not JSON, or not an object
};

ChunkInfo interpret_chunk(std::string_view data);

// obj[key] when it is an integer (a usage count); nullopt otherwise.
std::optional<int64_t> json_count(const nlohmann::json& obj, const char* key);

}  // namespace nexus::loadgen
