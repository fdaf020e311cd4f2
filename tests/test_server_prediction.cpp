// `prediction` (OpenAI's Predicted Outputs) through the real server on
// stories260K: the output is the one without it, usage's
// completion_tokens_details counts what the alignment rule
// (engine/spec/prediction.h) gives for the output and the prediction's
// tokens, and malformed predictions are 400s naming the field.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "engine/spec/prediction.h"
#include "support/engine_server.h"
#include "support/event_collector.h"
#include "support/metrics_text.h"
#include "tokenizer/tokenizer.h"

using namespace nexus;
using nlohmann::json;

namespace {

class ServerPrediction : public nexus::test::EngineServer {
 protected:
  void SetUp() override {
    EngineOptions eo;
    eo.n_threads = 2;
    eo.n_ctx = 256;
    eo.spec.proposer = SpecProposer::Ngram;
    eo.spec.adaptive = false;  // the counts below must not depend on measured step costs
    start("stories260K.gguf", eo);
  }

  // The output tokens of a greedy completion of `prompt`, straight from the engine.
  std::vector<int32_t> engine_tokens(const std::string& prompt, int32_t max_tokens) {
    GenerationRequest r;
    r.prompt = m_->tok->encode(prompt, m_->tok->add_bos_default(), true);
    r.sampling.temperature = 0;
    r.stop.max_tokens = max_tokens;
    auto res = std::make_shared<nexus::test::EventCollector>();
    EXPECT_NE(engine_->submit(r, nexus::test::into(res)), nullptr);
    EXPECT_TRUE(res->wait());
    return res->tokens;
  }
};

// The alignment rule replayed with the tracker itself (its own unit tests
// check it against the rule's text).
int32_t accepted_by_rule(const std::vector<int32_t>& prediction, const std::vector<int32_t>& output) {
  spec::PredictionTracker t(prediction);
  for (size_t n = 1; n <= output.size(); ++n) t.on_token(std::span<const int32_t>(output.data(), n));
  return t.accepted();
}

TEST_F(ServerPrediction, CompletionsOutputIsUnchangedAndUsageCountsThePrediction) {
  const std::string prompt = "Once upon a time";
  const json plain = post("/v1/completions", {{"prompt", prompt}, {"max_tokens", 30}, {"temperature", 0}});
  const std::string text = plain["choices"][0]["text"];
  EXPECT_FALSE(plain["usage"].contains("completion_tokens_details"));
  const std::vector<int32_t> out = engine_tokens(prompt, 30);

  std::string edited = text;  // an edit in the middle
  edited.replace(edited.size() / 2, 4, " dog ");
  for (const std::string& prediction : {text, edited, std::string("zebra quantum xylophone")}) {
    const json j = post("/v1/completions", {{"prompt", prompt},
                                            {"max_tokens", 30},
                                            {"temperature", 0},
                                            {"prediction", {{"type", "content"}, {"content", prediction}}}});
    EXPECT_EQ(j["choices"][0]["text"], text) << prediction;
    const std::vector<int32_t> p = m_->tok->encode_as_output(prediction);  // as the server spells it
    const int32_t want = accepted_by_rule(p, out);
    EXPECT_EQ(j["usage"]["completion_tokens_details"]["accepted_prediction_tokens"], want) << prediction;
    EXPECT_EQ(j["usage"]["completion_tokens_details"]["rejected_prediction_tokens"],
              static_cast<int32_t>(p.size()) - want)
        << prediction;
    if (prediction == text) {
      // The output's own text spells the output: every token accepted, none
      // rejected (its first token is ",", which encode() would have spelt
      // with the space prefix: 3 accepted, 13 rejected before).
      EXPECT_EQ(want, 30);
      EXPECT_EQ(p, out);
    }
  }
  EXPECT_GT(engine_->stats().spec_accepted_prediction, 0);
}

TEST_F(ServerPrediction, ChatTakesTextParts) {
  const json body = {{"messages", {{{"role", "user"}, {"content", "Tell me a story"}}}},
                     {"max_tokens", 20},
                     {"temperature", 0}};
  const json plain = post("/v1/chat/completions", body);
  json with = body;
  const std::string content = plain["choices"][0]["message"]["content"];
  with["prediction"] = {{"type", "content"},
                        {"content", {{{"type", "text"}, {"text", content.substr(0, 10)}},
                                     {{"type", "text"}, {"text", content.substr(10)}}}}};
  const json j = post("/v1/chat/completions", with);
  EXPECT_EQ(j["choices"][0]["message"]["content"], content);
  ASSERT_TRUE(j["usage"].contains("completion_tokens_details")) << j.dump();
  EXPECT_GT(j["usage"]["completion_tokens_details"]["accepted_prediction_tokens"], 0);
}

TEST_F(ServerPrediction, MalformedPredictionsAreRefused) {
  for (const json& bad : {json("text"), json{{"type", "text"}, {"content", "x"}}, json{{"type", "content"}},
                          json{{"type", "content"}, {"content", 5}},
                          json{{"type", "content"}, {"content", {{{"type", "image"}, {"text", "x"}}}}},
                          json{{"type", "content"}, {"content", "x"}, {"extra", 1}}}) {
    const nexus::test::HttpResponse r =
        post_raw("/v1/completions", {{"prompt", "Once"}, {"max_tokens", 2}, {"prediction", bad}});
    EXPECT_EQ(r.status, 400) << bad.dump() << " -> " << r.body;
    const json e = json::parse(r.body, nullptr, false);
    EXPECT_EQ(e["error"]["param"], "prediction") << r.body;
  }
  // null is absent.
  EXPECT_EQ(post_raw("/v1/completions", {{"prompt", "Once"}, {"max_tokens", 2}, {"prediction", nullptr}}).status, 200);
}

}  // namespace

// docs/metrics.md's speculative-decoding series, scraped after one request
// of each proposer: what the engine counted, as /metrics renders it.
TEST_F(ServerPrediction, MetricsCountProposedAndAcceptedTokensByProposer) {
  const std::string prompt = "Once upon a time";
  const json plain = post("/v1/completions", {{"prompt", prompt}, {"max_tokens", 30}, {"temperature", 0}});
  const std::string text = plain["choices"][0]["text"];
  const json predicted = post("/v1/completions", {{"prompt", prompt},
                                                  {"max_tokens", 30},
                                                  {"temperature", 0},
                                                  {"prediction", {{"type", "content"}, {"content", text}}}});
  const double accepted_in_usage = predicted["usage"]["completion_tokens_details"]["accepted_prediction_tokens"];
  // Repeating text: the n-gram proposer finds its own earlier tokens.
  std::string repeat;
  for (int i = 0; i < 6; ++i) repeat += "The cat sat on the mat. ";
  post("/v1/completions", {{"prompt", repeat}, {"max_tokens", 30}, {"temperature", 0}});

  nexus::test::HttpClient c("127.0.0.1", server_->port());
  const std::vector<nexus::test::MetricSample> m = nexus::test::parse_metrics_text(c.get("/metrics").body);
  auto value = [&](const std::string& name, const std::map<std::string, std::string>& labels = {}) {
    return nexus::test::metric_value(m, name, labels).value_or(-1);
  };
  const double proposed_p = value("nexus_spec_proposed_tokens_total", {{"proposer", "prediction"}});
  const double accepted_p = value("nexus_spec_accepted_tokens_total", {{"proposer", "prediction"}});
  EXPECT_GE(proposed_p, accepted_p);
  // Draft tokens the verify runs accepted: the output's tokens the prediction
  // supplied, less those sampled outside a verify run (the first token, the
  // bonus token after each run), so at most what usage counts by the
  // alignment rule (24 of 30 here).
  EXPECT_GT(accepted_p, 0);
  EXPECT_LE(accepted_p, accepted_in_usage);
  EXPECT_GT(value("nexus_spec_proposed_tokens_total", {{"proposer", "ngram"}}), 0);
  EXPECT_LE(value("nexus_spec_accepted_tokens_total", {{"proposer", "ngram"}}),
            value("nexus_spec_proposed_tokens_total", {{"proposer", "ngram"}}));
  EXPECT_GT(value("nexus_spec_accepted_length_count"), 0);
  EXPECT_GT(value("nexus_spec_verify_step_seconds_count"), 0);
  EXPECT_EQ(value("nexus_spec_accepted_length_sum"),
            accepted_p + value("nexus_spec_accepted_tokens_total", {{"proposer", "ngram"}}));
  // No draft model here: its series are there, at 0.
  EXPECT_EQ(value("nexus_spec_proposed_tokens_total", {{"proposer", "draft"}}), 0);
  EXPECT_EQ(value("nexus_spec_accepted_tokens_total", {{"proposer", "draft"}}), 0);
}

namespace {

// The server over an engine with a draft model (the model itself: every
// draft token is its own argmax).
class ServerDraftModel : public nexus::test::EngineServer {
 protected:
  void SetUp() override {
    const std::string path = nexus::test::shared_model_path("stories260K.gguf");
    if (!nexus::test::require_file(path)) {
      if (HasFailure()) return;
      GTEST_SKIP() << "missing shared file " << path;
    }
    EngineOptions eo;
    eo.n_threads = 2;
    eo.n_ctx = 256;
    eo.spec.draft_model = &nexus::test::loaded_model(path).model;
    eo.spec.adaptive = false;
    start("stories260K.gguf", eo);
  }
};

}  // namespace

// proposer="draft": the draft model's tokens, counted by /metrics; the
// completion is the plain greedy one.
TEST_F(ServerDraftModel, MetricsCountTheDraftModelsTokens) {
  const json body = post("/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 30}, {"temperature", 0}});
  EXPECT_EQ(body["usage"]["completion_tokens"], 30);
  nexus::test::HttpClient c("127.0.0.1", server_->port());
  const std::vector<nexus::test::MetricSample> m = nexus::test::parse_metrics_text(c.get("/metrics").body);
  auto value = [&](const std::string& name, const std::map<std::string, std::string>& labels = {}) {
    return nexus::test::metric_value(m, name, labels).value_or(-1);
  };
  const double proposed = value("nexus_spec_proposed_tokens_total", {{"proposer", "draft"}});
  EXPECT_GT(proposed, 0);
  EXPECT_EQ(value("nexus_spec_accepted_tokens_total", {{"proposer", "draft"}}), proposed);
  EXPECT_EQ(value("nexus_spec_proposed_tokens_total", {{"proposer", "ngram"}}), 0);
  EXPECT_EQ(value("nexus_spec_accepted_length_sum"), proposed);
}
