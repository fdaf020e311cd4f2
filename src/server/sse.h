// Server-sent events framing (WHATWG HTML, "Server-sent events"), as the
// OpenAI streaming API uses it: each event is one `data: <json>` line and a
// blank line; the stream ends with `data: [DONE]`. JSON from
// nlohmann::json::dump() has no raw newlines, so one data line suffices.
#pragma once

#include <string>
#include <string_view>

namespace nexus::server {

inline std::string sse_event(std::string_view payload) {
  std::string out;
  out.reserve(payload.size() + 8);
  out += "data: ";
  out += payload;
  out += "\n\n";
  return out;
}

inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

}  // namespace nexus::server
