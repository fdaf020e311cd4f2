// Bounded JSON parsing: one nesting limit for every JSON text that comes
// from outside (request bodies, WebSocket frames, tool-call arguments, a
// replica's streamed events at the gateway).
//
// nlohmann's parser itself is iterative, but much of what follows a parse
// is not: dump() (the serializer), copies, the Jinja interpreter's value
// conversion and tojson, the JSON-schema compiler. A 40 KB body of 20,000
// nested arrays overflowed their stacks. Refusing the nesting while parsing
// (each container's depth is known when it opens, before its contents are
// read) bounds every walker after it by the same limit, so they may stay
// recursive.
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

// nlohmann's DOM builder, counting containers as they open: deeper than
// max_depth throws JsonTooDeep before any of that container is read. (Not
// the parser callback: nlohmann 3.11's callback builder scans the parent
// object for a discarded member after every object it closes, quadratic in
// an array of many objects; 20,000 `{}` took 15 s under ASan. Found by
// fuzz_json_schema.)
template <class BasicJson>
class BoundedDomParser : public nlohmann::detail::json_sax_dom_parser<BasicJson> {
  using Base = nlohmann::detail::json_sax_dom_parser<BasicJson>;

 public:
  BoundedDomParser(BasicJson& result, int max_depth) : Base(result, /*allow_exceptions=*/true), max_depth_(max_depth) {}
  bool start_object(std::size_t n) {
    enter();
    return Base::start_object(n);
  }
  bool end_object() {
    --depth_;
    return Base::end_object();
  }
  bool start_array(std::size_t n) {
    enter();
    return Base::start_array(n);
  }
  bool end_array() {
    --depth_;
    return Base::end_array();
  }

 private:
  void enter() {
    if (++depth_ > max_depth_) throw JsonTooDeep(max_depth_);
  }
  int max_depth_;
  int depth_ = 0;
};

// Parses `text` as BasicJson (nlohmann::json or ordered_json), refusing
// nesting deeper than `max_depth` as soon as the parser meets it; linear in
// the text. Throws JsonTooDeep, or BasicJson::parse_error for invalid JSON
// (as BasicJson::parse does).
template <class BasicJson = nlohmann::json>
BasicJson parse_json_bounded(std::string_view text, int max_depth = max_json_depth()) {
  BasicJson result;
  BoundedDomParser<BasicJson> builder(result, max_depth);
  BasicJson::sax_parse(text, &builder);
  return result;
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

}  // namespace nexus
