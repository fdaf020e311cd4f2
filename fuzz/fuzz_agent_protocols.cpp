// libFuzzer target: the agent protocols' request parsers -- OpenAI's
// Responses API (server/responses/responses_request.h, over a store that
// holds one response, "resp_seed", with a tool call, so previous_response_id
// and function_call_output paths are reached) and Anthropic's Messages API
// (server/anthropic/messages_request.h, generation and count_tokens). The
// input is one JSON text, given to each parser as a request body. Expected
// refusals are ApiErrors below 500. Findings besides crashes, sanitizer
// reports and hangs:
//   - an ApiError of 500 or more (a client's body made a server error);
//   - any other exception escaping a parser (the server's 500 too);
//   - an accepted request without messages, or whose tool choice forces a
//     call without tools.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "json_mutator.h"
#include "server/anthropic/messages_request.h"
#include "server/api_error.h"
#include "server/responses/response_store.h"
#include "server/responses/responses_request.h"

namespace {

using nexus::server::ApiError;
using nexus::server::ConversationRequest;

[[noreturn]] void finding(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_agent_protocols: %s: %s\n", what, detail.c_str());
  std::abort();
}

const nexus::server::ResponseStore& store() {
  static const nexus::server::ResponseStore* s = [] {
    auto* st = new nexus::server::ResponseStore();
    nexus::server::StoredResponse r;
    r.response = {{"id", "resp_seed"}};
    r.transcript.push_back({"user", "Weather in Paris?", nullptr, "", ""});
    r.transcript.push_back({"assistant", "", nlohmann::ordered_json::parse(
        R"([{"id": "call_seed", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}])"),
        "", ""});
    st->put("resp_seed", std::move(r));
    return st;
  }();
  return *s;
}

void check(const ConversationRequest& r, const char* protocol) {
  if (r.messages.empty()) finding("an accepted request without messages", protocol);
  if (r.tool_use.forced() && r.tool_use.tools.empty()) finding("a forced tool choice without tools", protocol);
}

template <typename F>
void run(const char* protocol, F&& parse) {
  try {
    check(parse(), protocol);
  } catch (const ApiError& e) {
    if (e.status >= 500) finding("a client's body made a server error", std::string(protocol) + ": " + e.message);
  } catch (const std::exception& e) {
    finding("an exception other than ApiError escaped", std::string(protocol) + ": " + e.what());
  }
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned seed) {
  return nexus::fuzz::mutate_json_input(data, size, max_size, seed, nexus::fuzz::Framing::Whole);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  run("responses", [&] {
    nexus::server::ResponsesParseOptions o;
    o.websocket = size % 2 == 0;  // `generate` accepted on half the inputs
    return nexus::server::parse_responses_request(body, store(), o).conversation;
  });
  run("messages", [&] { return nexus::server::parse_messages_request(body, {}); });
  run("count_tokens", [&] {
    nexus::server::MessagesParseOptions o;
    o.count_tokens = true;
    return nexus::server::parse_messages_request(body, o);
  });
  return 0;
}
