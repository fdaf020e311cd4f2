// ResponsesTranscript (gateway/responses_transcript.h) without sockets: the
// pairing of each response.create with its answer, the history it keeps of
// the connection's last response, and what it tells the client and the new
// replica when the replica dies.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "gateway/responses_transcript.h"

using nexus::gateway::ResponsesTranscript;
using nlohmann::json;

namespace {

json user(const std::string& text) {
  return {{"type", "message"}, {"role", "user"}, {"content", {{{"type", "input_text"}, {"text", text}}}}};
}
json output_message(const std::string& text) {
  return {{"id", "msg_o"}, {"type", "message"}, {"role", "assistant"}, {"status", "completed"},
          {"content", {{{"type", "output_text"}, {"text", text}, {"annotations", json::array()}}}}};
}
std::string create(json input, const std::string& previous = "") {
  json ev = {{"type", "response.create"}, {"input", std::move(input)}, {"instructions", "be brief"}};
  if (!previous.empty()) ev["previous_response_id"] = previous;
  return ev.dump();
}
std::string created(const std::string& id) {
  return json{{"type", "response.created"}, {"sequence_number", 0}, {"response", {{"id", id}}}}.dump();
}
// (`output` a json::array: a braced list of one object is that object under clang.)
std::string completed(const std::string& id, json output, int seq = 5) {
  return json{{"type", "response.completed"}, {"sequence_number", seq}, {"response", {{"id", id}, {"output", std::move(output)}}}}
      .dump();
}
std::string create_error(const std::string& code) {
  return json{{"type", "error"}, {"status", 400}, {"event", "response.create"}, {"error", {{"code", code}}}}.dump();
}

}  // namespace

TEST(ResponsesTranscript, AContinuationOfTheDeadReplicasResponseIsRewrittenWithItsWholeHistory) {
  ResponsesTranscript t;
  EXPECT_FALSE(t.on_client_event(create("Once upon a time")));  // a string input: one user message
  t.on_server_event(created("r1"));
  t.on_server_event(completed("r1", json::array({output_message("there was a cat."), {{"type", "function_call"}, {"call_id", "c1"}}})));
  EXPECT_FALSE(t.on_client_event(create(json::array({user("More")}), "r1")));  // before a move: forwarded as sent
  t.on_server_event(created("r2"));
  t.on_server_event(completed("r2", json::array({output_message("It slept.")})));
  EXPECT_EQ(t.last_response(), "r2");

  EXPECT_TRUE(t.death_notice(true, "killed").empty());  // nothing was running
  EXPECT_TRUE(t.replay().empty());                      // nothing unanswered
  const auto next = t.on_client_event(create(json::array({user("And then?")}), "r2"));
  ASSERT_TRUE(next);
  const json j = json::parse(*next);
  EXPECT_FALSE(j.contains("previous_response_id"));
  EXPECT_EQ(j["instructions"], "be brief");  // the request's own fields stay
  const json want = json::array({user("Once upon a time"), output_message("there was a cat."),
                                 {{"type", "function_call"}, {"call_id", "c1"}}, user("More"),
                                 output_message("It slept."), user("And then?")});
  EXPECT_EQ(j["input"], want);
  // A continuation of the new replica's response is its own business.
  t.on_server_event(created("r3"));
  t.on_server_event(completed("r3", json::array()));
  EXPECT_FALSE(t.on_client_event(create(json::array({user("Go on")}), "r3")));
}

TEST(ResponsesTranscript, EachCreateIsPairedWithItsAnswerAndRefusedOnesLeaveNoHistory) {
  ResponsesTranscript t;
  t.on_client_event(create("a"));
  t.on_server_event(created("r1"));
  t.on_client_event(create("b", "r1"));  // sent while r1 runs: refused
  t.on_server_event(create_error("response_in_progress"));
  t.on_server_event(completed("r1", json::array({output_message("A.")})));
  t.on_client_event(R"({"type":"response.cancel"})");  // no answer of its own: not a request
  t.on_server_event(R"({"type":"error","status":400,"error":{"code":"no_response"}})");
  t.on_client_event(create("c", "unknown"));
  t.on_server_event(create_error("previous_response_not_found"));
  EXPECT_EQ(t.pending_requests(), 0u);
  EXPECT_FALSE(t.lost());
  EXPECT_EQ(t.last_response(), "r1");
  t.replay();
  const json j = json::parse(*t.on_client_event(create("d", "r1")));
  EXPECT_EQ(j["input"], json::array({user("a"), output_message("A."), user("d")}));
}

TEST(ResponsesTranscript, TheDeathOfARunningResponseFailsItAndUnansweredRequestsAreReplayedRewritten) {
  ResponsesTranscript t;
  t.on_client_event(create("a"));
  t.on_server_event(created("r1"));
  t.on_server_event(completed("r1", json::array({output_message("")})));  // no text: no assistant turn kept
  t.on_client_event(create("b", "r1"));
  t.on_server_event(json{{"type", "response.created"},
                          {"sequence_number", 0},
                          {"response",
                           {{"id", "r2"},
                            {"object", "response"},
                            {"created_at", 1765000000},
                            {"model", "m"},
                            {"status", "in_progress"},
                            {"output", json::array()},
                            {"usage", nullptr}}}}
                        .dump());
  t.on_server_event(json{{"type", "response.output_text.delta"}, {"sequence_number", 7}}.dump());
  t.on_client_event(create("c", "r1"));  // sent as the replica died: no answer yet
  const auto notice = t.death_notice(true, "read: end of stream");
  ASSERT_EQ(notice.size(), 1u);
  const json failed = json::parse(notice[0]);
  EXPECT_EQ(failed["type"], "response.failed");
  EXPECT_EQ(failed["sequence_number"], 8);
  EXPECT_EQ(failed["response"]["id"], "r2");
  EXPECT_EQ(failed["response"]["status"], "failed");
  EXPECT_EQ(failed["response"]["error"]["code"], "replica_failed");
  // The object response.created announced, failed: its model and created_at stay.
  EXPECT_EQ(failed["response"]["model"], "m");
  EXPECT_EQ(failed["response"]["created_at"], 1765000000);
  EXPECT_EQ(failed["response"]["output"], json::array());
  const auto replay = t.replay();
  ASSERT_EQ(replay.size(), 1u);
  const json j = json::parse(replay[0]);
  EXPECT_FALSE(j.contains("previous_response_id"));
  EXPECT_EQ(j["input"], json::array({user("a"), user("c")}));
  // The replayed request's answer comes from the new replica.
  t.on_server_event(created("n1"));
  EXPECT_EQ(t.pending_requests(), 0u);
}

TEST(ResponsesTranscript, WhatItCannotRewriteGoesAsItIsAndARefusalNamingNoRequestLosesTrack) {
  ResponsesTranscript small(64);
  small.on_client_event(create("a long first message that does not fit the history budget"));
  small.on_server_event(created("r1"));
  small.on_server_event(completed("r1", json::array({output_message("x")})));
  small.replay();
  EXPECT_FALSE(small.on_client_event(create("b", "r1")));  // history dropped: sent as is

  ResponsesTranscript t;
  t.on_client_event(create("a"));
  t.on_server_event(R"({"type":"error","status":400,"error":{"code":"message_too_large"}})");
  EXPECT_TRUE(t.lost());
  EXPECT_FALSE(t.on_client_event(create("b")));
}
