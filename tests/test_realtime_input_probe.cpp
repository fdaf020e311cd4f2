// realtime::probe_input_append (server/realtime_input_probe.h): the size of a
// large input.append without parsing its text. Whenever it answers, the
// answer is input_bytes() of what parse_client_event makes of the whole
// message; whenever the whole message would be refused by the parse, it
// does not answer.
#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "server/realtime_conversation.h"
#include "server/realtime_input_probe.h"
#include "server/realtime_protocol.h"

using namespace nexus::server::realtime;
using nlohmann::json;

namespace {

// input_bytes() of the full parse; nullopt when it is not a valid input.append.
std::optional<uint64_t> parsed_bytes(std::string_view frame) {
  try {
    const ClientEvent ev = parse_client_event(frame);
    if (ev.type != EventType::InputAppend) return std::nullopt;
    return input_bytes(*ev.input);
  } catch (const EventError&) {
    return std::nullopt;
  }
}

std::string long_text(size_t n, const std::string& unit = "lorem ") {
  std::string s;
  while (s.size() < n) s += unit;
  return s;
}

// Same answer as the full parse, and an answer at all.
void expect_probed(const std::string& frame) {
  const std::optional<uint64_t> probed = probe_input_append(frame);
  ASSERT_TRUE(probed.has_value()) << frame.substr(0, 200);
  EXPECT_EQ(probed, parsed_bytes(frame)) << frame.substr(0, 200);
}

}  // namespace

TEST(RealtimeInputProbe, MeasuresLongTextAndMessageContent) {
  expect_probed(json{{"type", "input.append"}, {"text", long_text(900 << 10)}}.dump());
  expect_probed(json{{"text", long_text(5000)}, {"type", "input.append"}}.dump());  // any key order
  expect_probed(json{{"type", "input.append"}, {"message", {{"role", "user"}, {"content", long_text(3000)}}}}.dump());
  // Escapes decode to fewer bytes than they take: \n, \", \\, \u00e9 (2 bytes), \u20ac (3), a surrogate pair (4).
  expect_probed(R"({"type":"input.append","text":")" + long_text(2000, R"(a\nb\"c\\d\u00e9\u20AC\ud83d\ude00\/)") +
                R"("})");
  // A long string elsewhere (ignored by the event) is not the text's size.
  expect_probed(json{{"type", "input.append"}, {"text", "short"}, {"padding", long_text(4000)}}.dump());
  expect_probed(" \n{ \"type\" : \"input.append\" , \"text\" : \"" + long_text(2000) + "\" } \n");
}

TEST(RealtimeInputProbe, LeavesEverythingElseToTheFullParse) {
  const std::string text = long_text(4000);
  for (const std::string& frame : {
           // Not worth it: no long string.
           json{{"type", "input.append"}, {"text", "short"}}.dump(),
           // Other events, or none.
           json{{"type", "session.update"}, {"session", {{"system", text}}}}.dump(),
           json{{"type", "response.redirect"}, {"text", text}}.dump(),
           json{{"type", text}, {"text", "x"}}.dump(),
           // Invalid events the full parse refuses with its own error.
           json{{"type", "input.append"}, {"text", text}, {"message", {{"role", "user"}, {"content", "x"}}}}.dump(),
           json{{"type", "input.append"}, {"message", {{"role", text}, {"content", "x"}}}}.dump(),
           json{{"type", "input.append"}, {"text", 5}, {"other", text}}.dump(),
           // Invalid JSON: inside a long string (bad escape, lone surrogates, a raw control byte) or around it.
           R"({"type":"input.append","text":")" + text + R"(\x"})",
           R"({"type":"input.append","text":")" + text + R"(\ud83d"})",
           R"({"type":"input.append","text":")" + text + R"(\ude00x"})",
           R"({"type":"input.append","text":")" + text + R"(\u12"})",
           R"({"type":"input.append","text":")" + text + "\t\"}",
           R"({"type":"input.append","text":")" + text,
           R"({"type":"input.append","text":")" + text + R"("})" + "}",
           R"({"type":"input.append","text":")" + text + R"(" "x":1})",
           R"({"type":"input.append","text":")" + text + R"(\"})",
           // A long key, and a string holding the placeholders' marker.
           R"({"type":"input.append","text":"x",")" + text + R"(":1})",
           R"({"type":"input.append","text":")" + text + R"(\u0001"})",
       }) {
    EXPECT_EQ(probe_input_append(frame), std::nullopt) << frame.substr(0, 120) << " ... " << frame.substr(frame.size() - 40);
  }
}

// Random messages built from pieces that are valid or not, long or short:
// the probe never disagrees with the full parse.
TEST(RealtimeInputProbe, AgreesWithTheFullParse) {
  std::mt19937 rng(26);
  const std::vector<std::string> units = {"a", "lorem ", "\\n", "\\\"", "\\\\", "\\u00e9", "\\u20ac", "\\ud83d\\ude00",
                                          "\\u0000", "\xc3\xa9", "\\", "\\u", "\\ud800", "\x01"};
  const std::vector<std::string> heads = {R"({"type":"input.append","text":")",
                                          R"({"type":"input.append","message":{"role":"user","content":")",
                                          R"({"type":"input.append","message":{"role":"tool","content":")",
                                          R"({"type":"response.create","text":")"};
  const std::vector<std::string> tails = {R"("})", R"("}})", R"(","extra":[1,2,{"k":"v"}]})", R"("})", "\"", ""};
  int answered = 0;
  for (int round = 0; round < 600; ++round) {
    std::string s;
    const size_t n = std::uniform_int_distribution<size_t>(1, 3000)(rng);
    const bool clean = rng() % 2 == 0;  // only valid units
    while (s.size() < n) s += units[rng() % (clean ? 9 : units.size())];
    // (Drawn in separate statements: the operands of one + are evaluated
    // in an order the compilers choose differently.)
    const std::string& head = heads[rng() % heads.size()];
    const std::string& tail = tails[rng() % tails.size()];
    const std::string frame = head + s + tail;
    const std::optional<uint64_t> probed = probe_input_append(frame), parsed = parsed_bytes(frame);
    // A valid event with a long text is always answered (\u0000 is no marker).
    if (parsed && s.size() >= kLongString + 12) {
      EXPECT_TRUE(probed.has_value()) << frame.substr(0, 200);
    }
    if (!probed) continue;
    ++answered;
    EXPECT_EQ(probed, parsed) << frame.substr(0, 200);
  }
  EXPECT_GT(answered, 20);  // 29 of the 600 with this seed
}
