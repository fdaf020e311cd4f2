// Bounded JSON parsing: one nesting limit for every JSON text that comes
// from outside (request bodies, WebSocket frames, tool-call arguments, a
// replica's streamed events at the gateway).
//
// nlohmann's parser itself is iterative, but much of what follows a parse
// is not: dump() (the serializer), copies, the Jinja interpreter's value
// conversion and tojson, the JSON-schema compiler. A 40 KB body of 20,000
// nested arrays overflowed their stacks. Refusing the nesting while parsing
// (through the parser's callback, which sees each container's depth before
// its contents are read) bounds every walker after it by the same limit, so
// they may stay recursive.
//
// Depth counts containers: `1`, `"x"` are depth 0, `[]` and `{}` depth 1,
// `{"a":[1]}` depth 2. The limit is process-wide (set once at startup by
// `nexus serve --max-json-depth` / `nexus gateway --max-json-depth`, default
// kDefaultMaxJsonDepth: JSON schemas of real APIs nest under 20 levels;
// OpenAI's own API refuses a schema past 10 levels of objects).
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "util/error.h"

namespace nexus {

inline constexpr int kDefaultMaxJsonDepth = 128;
inline constexpr int kMaxJsonDepthLimit = 4096;  // the largest --max-json-depth (stacks stay bounded)

// The process-wide limit (kDefaultMaxJsonDepth until set). set_max_json_depth
// takes 1..kMaxJsonDepthLimit; call it before serving (it is read atomically).
int max_json_depth();
void set_max_json_depth(int depth);

// Thrown when a text nests deeper than the limit; `limit` is the limit.
class JsonTooDeep : public Error {
 public:
  explicit JsonTooDeep(int limit);
  int limit;
};

// The client-facing message for a JsonTooDeep ("... nested more than N levels ...").
std::string json_too_deep_message(int limit);

// Parses `text` as BasicJson (nlohmann::json or ordered_json), refusing
// nesting deeper than `max_depth` as soon as the parser meets it.
// Throws JsonTooDeep, or BasicJson::parse_error for invalid JSON (as
// BasicJson::parse does).
template <class BasicJson = nlohmann::json>
BasicJson parse_json_bounded(std::string_view text, int max_depth = max_json_depth()) {
  // The callback sees object_start / array_start with the depth of the
  // enclosing containers (0 at the top), before any content is read.
  typename BasicJson::parser_callback_t check = [max_depth](int depth, nlohmann::json::parse_event_t ev,
                                                            BasicJson&) {
    if ((ev == nlohmann::json::parse_event_t::object_start || ev == nlohmann::json::parse_event_t::array_start) &&
        depth >= max_depth)
      throw JsonTooDeep(max_depth);
    return true;
  };
  return BasicJson::parse(text, check);
}

// As parse_json_bounded, but an invalid or too-deep text gives a discarded
// value (BasicJson::parse(text, nullptr, false)'s contract) instead of
// throwing: for peers' texts (a replica's events, model output) where the
// caller only asks "is it usable".
template <class BasicJson = nlohmann::json>
BasicJson parse_json_bounded_or_discarded(std::string_view text, int max_depth = max_json_depth()) {
  try {
    return parse_json_bounded<BasicJson>(text, max_depth);
  } catch (const JsonTooDeep&) {
  } catch (const nlohmann::json::exception&) {
  }
  return BasicJson(BasicJson::value_t::discarded);
}

// The nesting depth of a value (containers, as above), walked iteratively:
// for values built in-process (a template's output) that are about to be
// serialized by a recursive walker.
int json_depth(const nlohmann::json& value);

}  // namespace nexus
