// nexus bench request plan: length distributions, Poisson arrivals, prompts
// files, sessions and their history, server URLs (src/loadgen/).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "loadgen/arrivals.h"
#include "loadgen/distribution.h"
#include "loadgen/url.h"
#include "loadgen/words.h"
#include "loadgen/workload.h"
#include "support/test_support.h"
#include "util/error.h"

using namespace nexus;
using namespace nexus::loadgen;

namespace {

TEST(BenchDistribution, ParsesTheThreeForms) {
  std::mt19937_64 rng(1);
  const auto f = LengthDistribution::parse("128");
  EXPECT_EQ(f.kind(), LengthDistribution::Kind::Fixed);
  EXPECT_EQ(f.sample(rng), 128);
  EXPECT_DOUBLE_EQ(f.mean(), 128);

  const auto u = LengthDistribution::parse("uniform:64:256");
  EXPECT_EQ(u.kind(), LengthDistribution::Kind::Uniform);
  EXPECT_DOUBLE_EQ(u.mean(), 160);
  int lo = 1 << 30, hi = 0;
  double sum = 0;
  for (int i = 0; i < 20000; ++i) {
    const int v = u.sample(rng);
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
  }
  EXPECT_EQ(lo, 64);  // both ends reachable in 20000 draws of 193 values
  EXPECT_EQ(hi, 256);
  EXPECT_NEAR(sum / 20000, 160, 2);

  const auto n = LengthDistribution::parse("normal:100:10");
  EXPECT_EQ(n.kind(), LengthDistribution::Kind::Normal);
  sum = 0;
  for (int i = 0; i < 20000; ++i) sum += n.sample(rng);
  EXPECT_NEAR(sum / 20000, 100, 0.5);
  // A wide normal is clamped to >= 1.
  const auto wide = LengthDistribution::parse("normal:2:50");
  for (int i = 0; i < 1000; ++i) EXPECT_GE(wide.sample(rng), 1);
  EXPECT_EQ(LengthDistribution::parse("normal:7:0").sample(rng), 7);
}

TEST(BenchDistribution, RejectsBadSpecs) {
  for (const char* bad : {"", "0", "-5", "abc", "12x", "1.5", "uniform:10", "uniform:10:5", "uniform:0:5",
                          "uniform:a:b", "normal:0:1", "normal:10:-1", "normal:10", "poisson:3", "uniform:1:2:3",
                          "99999999999"}) {
    EXPECT_THROW(LengthDistribution::parse(bad), Error) << bad;
  }
  try {
    LengthDistribution::parse("uniform:10:5");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("uniform:10:5"), std::string::npos) << e.what();
  }
}

TEST(BenchArrivals, PoissonGapsHaveMeanOneOverRate) {
  for (double rate : {0.5, 4.0, 100.0}) {
    PoissonArrivals a(rate, 42);
    const int n = 50000;
    double sum = 0, sum_sq = 0;
    for (int i = 0; i < n; ++i) {
      const double g = a.next_gap_s();
      ASSERT_GT(g, 0);
      sum += g;
      sum_sq += g * g;
    }
    const double mean = sum / n;
    // Standard error of the mean is (1/rate)/sqrt(n) ~ 0.45%; allow 3%.
    EXPECT_NEAR(mean * rate, 1.0, 0.03) << rate;
    // Exponential: the standard deviation equals the mean.
    EXPECT_NEAR(std::sqrt(sum_sq / n - mean * mean) * rate, 1.0, 0.05) << rate;
  }
  PoissonArrivals a(10, 7), b(10, 7);
  double ta = 0;
  for (int i = 0; i < 5; ++i) {
    ta = a.next_arrival_s();
    EXPECT_DOUBLE_EQ(ta, b.next_arrival_s());  // same seed, same schedule
  }
  EXPECT_GT(ta, 0);
  EXPECT_THROW(PoissonArrivals(0, 1), Error);
  EXPECT_THROW(PoissonArrivals(-1, 1), Error);
  EXPECT_THROW(PoissonArrivals(std::nan(""), 1), Error);
}

TEST(BenchWords, RandomWordsHasTheRequestedCount) {
  std::mt19937_64 rng(3);
  const std::string s = random_words(50, rng);
  EXPECT_EQ(std::count(s.begin(), s.end(), ' '), 49);
  EXPECT_GE(word_list_size(), 100u);
}

TEST(BenchPrompts, ParsesPromptAndMessagesLines) {
  const auto v = parse_prompts_jsonl(
      "{\"prompt\": \"Once upon\"}\n\n{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"max_tokens\": 7}\r\n",
      "p.jsonl");
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(*v[0].prompt, "Once upon");
  EXPECT_TRUE(v[0].messages.is_null());
  EXPECT_FALSE(v[0].max_tokens.has_value());
  EXPECT_FALSE(v[1].prompt.has_value());
  EXPECT_EQ(v[1].messages[0]["content"], "Hi");
  EXPECT_EQ(*v[1].max_tokens, 7);
}

TEST(BenchPrompts, BadLinesNameTheLine) {
  const std::pair<const char*, const char*> cases[] = {
      {"{\"prompt\": \"a\"}\nnot json\n", "p.jsonl:2"},
      {"[1]\n", "p.jsonl:1"},
      {"{\"prompt\": 3}\n", "p.jsonl:1"},
      {"{\"prompt\": \"a\", \"messages\": []}\n", "p.jsonl:1"},
      {"{}\n", "p.jsonl:1"},
      {"{\"messages\": []}\n", "p.jsonl:1"},
      {"{\"messages\": [{\"content\": \"x\"}]}\n", "p.jsonl:1"},
      {"\n{\"prompt\": \"a\", \"max_tokens\": 0}\n", "p.jsonl:2"},
      {"{\"prompt\": \"a\", \"max_tokens\": \"8\"}\n", "p.jsonl:1"},
      {"\n\n", "no prompts"},
  };
  for (const auto& [text, where] : cases) {
    try {
      parse_prompts_jsonl(text, "p.jsonl");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(where), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(load_prompts_jsonl("/nonexistent/prompts.jsonl"), Error);
}

WorkloadOptions synthetic(Api api, int turns, uint64_t seed) {
  WorkloadOptions o;
  o.api = api;
  o.prompt_tokens = LengthDistribution::parse("uniform:5:20");
  o.max_tokens = LengthDistribution::parse("uniform:1:100");
  o.turns = turns;
  o.seed = seed;
  o.model = "m";
  o.ignore_eos = true;
  return o;
}

TEST(BenchWorkload, SessionsDependOnlyOnSeedAndIndex) {
  const Workload a(synthetic(Api::Completions, 2, 5)), b(synthetic(Api::Completions, 2, 5)),
      c(synthetic(Api::Completions, 2, 6));
  // Asking in a different order gives the same sessions.
  const auto a3 = a.session(3), a0 = a.session(0);
  const auto b0 = b.session(0), b3 = b.session(3);
  ASSERT_EQ(a3.size(), 2u);
  EXPECT_EQ(a3[1].user_text, b3[1].user_text);
  EXPECT_EQ(a0[0].user_text, b0[0].user_text);
  EXPECT_EQ(a0[0].max_tokens, b0[0].max_tokens);
  EXPECT_NE(a0[0].user_text, a3[0].user_text);
  EXPECT_NE(a0[0].user_text, c.session(0)[0].user_text);
  for (const TurnPlan& t : a3) {
    const auto words = std::count(t.user_text.begin(), t.user_text.end(), ' ') + 1;
    EXPECT_GE(words, 5);
    EXPECT_LE(words, 20);
    EXPECT_GE(t.max_tokens, 1);
    EXPECT_LE(t.max_tokens, 100);
  }
}

TEST(BenchWorkload, ChatHistoryGrowsTurnByTurn) {
  const Workload w(synthetic(Api::Chat, 3, 1));
  Conversation conv(w, 0);
  ASSERT_EQ(conv.turns(), 3);
  const RequestSpec r0 = conv.request(0);
  EXPECT_EQ(r0.api, Api::Chat);
  EXPECT_EQ(r0.model, "m");
  EXPECT_TRUE(r0.ignore_eos);
  ASSERT_EQ(r0.messages.size(), 1u);
  EXPECT_EQ(r0.messages[0]["role"], "user");
  conv.add_reply("reply one");
  const RequestSpec r1 = conv.request(1);
  ASSERT_EQ(r1.messages.size(), 3u);
  EXPECT_EQ(r1.messages[0], r0.messages[0]);
  EXPECT_EQ(r1.messages[1]["role"], "assistant");
  EXPECT_EQ(r1.messages[1]["content"], "reply one");
  EXPECT_EQ(r1.messages[2]["role"], "user");
  EXPECT_EQ(r1.turn, 1);
}

TEST(BenchWorkload, CompletionsHistoryIsTheConcatenatedText) {
  const Workload w(synthetic(Api::Completions, 2, 1));
  Conversation conv(w, 4);
  const RequestSpec r0 = conv.request(0);
  conv.add_reply(" and then");
  const RequestSpec r1 = conv.request(1);
  EXPECT_EQ(r1.prompt.rfind(r0.prompt + " and then\n", 0), 0u) << r1.prompt;
  EXPECT_GT(r1.prompt.size(), r0.prompt.size() + 10);
  EXPECT_EQ(r1.session, 4u);
}

TEST(BenchWorkload, PromptsFileLinesAreUsedInOrder) {
  WorkloadOptions o = synthetic(Api::Chat, 1, 0);
  o.prompts = parse_prompts_jsonl("{\"prompt\": \"A\"}\n{\"messages\": [{\"role\": \"system\", \"content\": \"S\"}]"
                                  ", \"max_tokens\": 3}\n", "p");
  const Workload w(o);
  EXPECT_EQ(w.session(0)[0].user_text, "A");
  Conversation c1(w, 1);
  const RequestSpec r = c1.request(0);
  EXPECT_EQ(r.messages[0]["role"], "system");
  EXPECT_EQ(r.max_tokens, 3);
  EXPECT_EQ(w.session(2)[0].user_text, "A");  // wraps around
  // "messages" lines need the chat endpoint and a single turn.
  o.api = Api::Completions;
  EXPECT_THROW(Workload{o}, Error);
  o.api = Api::Chat;
  o.turns = 2;
  EXPECT_THROW(Workload{o}, Error);
}

TEST(BenchUrl, ParsesHostPortAndPrefix) {
  const ServerUrl a = parse_server_url("http://127.0.0.1:8080");
  EXPECT_EQ(a.host, "127.0.0.1");
  EXPECT_EQ(a.port, "8080");
  EXPECT_EQ(a.base_path, "");
  const ServerUrl b = parse_server_url("http://example.com/proxy/v1/");
  EXPECT_EQ(b.port, "80");
  EXPECT_EQ(b.base_path, "/proxy");
  EXPECT_EQ(b.to_string(), "http://example.com:80/proxy");
  const ServerUrl c = parse_server_url("http://[::1]:9000/v1");
  EXPECT_EQ(c.host, "::1");
  EXPECT_EQ(c.port, "9000");
  EXPECT_EQ(c.base_path, "");
  EXPECT_EQ(c.to_string(), "http://[::1]:9000");
  const ServerUrl d = parse_server_url("https://example.com/v1");
  EXPECT_TRUE(d.tls);
  EXPECT_EQ(d.port, "443");
  EXPECT_EQ(d.to_string(), "https://example.com:443");
  EXPECT_FALSE(a.tls);
  for (const char* bad : {"127.0.0.1:8080", "https://", "ftp://x", "http://", "http://h:0", "http://h:99999", "http://h:ab",
                          "http://u@h", "http://[::1"}) {
    EXPECT_THROW(parse_server_url(bad), Error) << bad;
  }
}

}  // namespace
