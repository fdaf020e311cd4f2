// The gateway's pure parts, without sockets: circuit breaker states, retry
// budget and backoff, fault specs, prefix hashing and affinity, /load
// parsing and the load score, the routing policies, what a DNS answer
// changes in the replica list, and the query-of-death registry.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include <nlohmann/json.hpp>

#include "gateway/circuit_breaker.h"
#include "gateway/dns_discovery.h"
#include "gateway/fault_injection.h"
#include "gateway/load_state.h"
#include "gateway/prefix_affinity.h"
#include "gateway/proxy_http.h"
#include "gateway/query_of_death.h"
#include "gateway/retry_policy.h"
#include "gateway/routing_policy.h"
#include "server/request_framing.h"
#include "util/error.h"
#include "util/json_depth.h"

using namespace nexus::gateway;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

TEST(GatewayBreaker, OpensAfterNFailuresInTheWindowThenProbesHalfOpen) {
  std::vector<BreakerState> seen;
  BreakerOptions o;
  o.failure_threshold = 3;
  o.window = milliseconds(1000);
  o.cool_down = milliseconds(500);
  CircuitBreaker b(o, [&](BreakerState, BreakerState to) { seen.push_back(to); });
  const auto t0 = Clock::now();
  b.record_failure(t0);
  b.record_failure(t0 + milliseconds(1500));  // the first fell out of the window
  b.record_failure(t0 + milliseconds(1600));
  EXPECT_EQ(b.state(), BreakerState::Closed);
  b.record_failure(t0 + milliseconds(1700));
  EXPECT_EQ(b.state(), BreakerState::Open);
  EXPECT_EQ(b.try_acquire(t0 + milliseconds(1800)), Admission::Denied);
  EXPECT_FALSE(b.would_admit(t0 + milliseconds(2100)));
  // After the cool-down: one probe at a time.
  EXPECT_EQ(b.try_acquire(t0 + milliseconds(2300)), Admission::Probe);
  EXPECT_EQ(b.state(), BreakerState::HalfOpen);
  EXPECT_EQ(b.try_acquire(t0 + milliseconds(2300)), Admission::Denied);
  b.record_failure(t0 + milliseconds(2400), true);  // the probe failed: open again
  EXPECT_EQ(b.state(), BreakerState::Open);
  EXPECT_EQ(b.try_acquire(t0 + milliseconds(3000)), Admission::Probe);
  b.record_success(t0 + milliseconds(3010), true);
  EXPECT_EQ(b.state(), BreakerState::Closed);
  EXPECT_EQ(b.try_acquire(t0 + milliseconds(3020)), Admission::Admitted);
  const std::vector<BreakerState> want{BreakerState::Open, BreakerState::HalfOpen, BreakerState::Open,
                                       BreakerState::HalfOpen, BreakerState::Closed};
  EXPECT_EQ(seen, want);
}

TEST(GatewayRetry, BudgetIsAShareOfRecentRequestsPlusAFloor) {
  RetryOptions o;
  o.budget_ratio = 0.2;
  o.min_retries = 2;
  RetryBudget budget(o);
  const auto t0 = Clock::now();
  for (int i = 0; i < 100; ++i) budget.record_request(t0);
  int granted = 0;
  while (budget.try_spend(t0) && granted < 1000) ++granted;
  EXPECT_EQ(granted, 22);  // 0.2 * 100 + 2
  // Ten seconds later the window has slid past them: only the floor is left.
  int later = 0;
  while (budget.try_spend(t0 + std::chrono::seconds(11)) && later < 1000) ++later;
  EXPECT_EQ(later, 2);
}

TEST(GatewayRetry, FullJitterBackoffStaysUnderTheDoublingCap) {
  RetryOptions o;
  o.base_backoff = milliseconds(10);
  o.max_backoff = milliseconds(50);
  std::mt19937_64 rng(7);
  int64_t max_seen[5] = {};
  for (int i = 0; i < 2000; ++i)
    for (int r = 1; r <= 4; ++r) max_seen[r] = std::max<int64_t>(max_seen[r], backoff_delay(r, o, rng).count());
  EXPECT_LE(max_seen[1], 10);
  EXPECT_GE(max_seen[1], 8);
  EXPECT_LE(max_seen[2], 20);
  EXPECT_GE(max_seen[2], 17);
  EXPECT_LE(max_seen[4], 50);  // capped (10 * 8 = 80 > 50)
  EXPECT_GE(max_seen[4], 45);
}

TEST(GatewayFaults, SpecsParseAndBadOnesAreRefusedByName) {
  const FaultRule a = parse_fault("abort=30:500");
  EXPECT_EQ(a.kind, FaultRule::Kind::Abort);
  EXPECT_DOUBLE_EQ(a.percent, 30);
  EXPECT_EQ(a.status, 500);
  EXPECT_EQ(a.replica, "");
  const FaultRule d = parse_fault("delay=12.5:200@http://127.0.0.1:9000/v1");
  EXPECT_EQ(d.kind, FaultRule::Kind::Delay);
  EXPECT_EQ(d.delay.count(), 200);
  EXPECT_EQ(d.replica, "http://127.0.0.1:9000");
  for (const char* bad : {"abort=30", "abort=130:500", "abort=30:200", "delay=x:5", "slow=5:5", "abort=5:500@ftp://x"})
    EXPECT_THROW(parse_fault(bad), nexus::Error) << bad;
  // Draws: 0% never, 100% always, per replica only where it applies.
  std::mt19937_64 rng(1);
  const std::vector<FaultRule> rules{parse_fault("abort=100:503@http://127.0.0.1:9000"), parse_fault("delay=0:50")};
  EXPECT_EQ(decide_faults(rules, "http://127.0.0.1:9000", rng).abort_status, 503);
  EXPECT_FALSE(decide_faults(rules, "http://127.0.0.1:9001", rng).abort_status.has_value());
  EXPECT_EQ(decide_faults(rules, "http://127.0.0.1:9001", rng).delay.count(), 0);
  int hits = 0;
  const std::vector<FaultRule> thirty{parse_fault("abort=30:500")};
  for (int i = 0; i < 10000; ++i) hits += decide_faults(thirty, "http://a:1", rng).abort_status.has_value();
  EXPECT_NEAR(hits, 3000, 200);
}

TEST(GatewayDns, SourcesParseAndBadOnesAreRefused) {
  const DnsSource s = parse_dns_source("dns:nexus-replicas.default.svc.cluster.local:8080");
  EXPECT_EQ(s.name, "nexus-replicas.default.svc.cluster.local");
  EXPECT_EQ(s.port, "8080");
  for (const char* bad : {"nexus:8080", "srv:nexus:8080", "dns:nexus", "dns::8080", "dns:nexus:", "dns:nexus:0",
                          "dns:nexus:65536", "dns:nexus:80a"})
    EXPECT_THROW(parse_dns_source(bad), nexus::Error) << bad;
  EXPECT_EQ(replica_url_of(boost::asio::ip::make_address("10.1.2.3"), "8080"), "http://10.1.2.3:8080");
  EXPECT_EQ(replica_url_of(boost::asio::ip::make_address("fd00::7"), "8080"), "http://[fd00::7]:8080");
}

// A pod that appears is added once; one that leaves is unlisted, and
// listed again (the same replica, its history kept) when it comes back; an
// address the gateway has from --replica is not added twice.
TEST(GatewayDns, AnswersAddUnlistAndRelist) {
  const std::string a = "http://10.0.0.1:8080", b = "http://10.0.0.2:8080", c = "http://10.0.0.3:8080";
  DnsChanges d = reconcile({}, {}, {a, b});
  EXPECT_EQ(d.added, (std::vector<std::string>{a, b}));
  EXPECT_TRUE(d.unlisted.empty() && d.relisted.empty());
  d = reconcile({{a, true}, {b, true}}, {}, {b, c});
  EXPECT_EQ(d.added, (std::vector<std::string>{c}));
  EXPECT_EQ(d.unlisted, (std::vector<size_t>{0}));
  EXPECT_TRUE(d.relisted.empty());
  d = reconcile({{a, false}, {b, true}, {c, true}}, {}, {a, b, c});
  EXPECT_TRUE(d.added.empty());
  EXPECT_EQ(d.relisted, (std::vector<size_t>{0}));
  EXPECT_TRUE(d.unlisted.empty());
  d = reconcile({{a, true}}, {b}, {a, b, b, c});
  EXPECT_EQ(d.added, (std::vector<std::string>{c}));
  // An unlisted one that stays away changes nothing.
  d = reconcile({{a, false}}, {}, {});
  EXPECT_TRUE(d.added.empty() && d.unlisted.empty() && d.relisted.empty());
}

TEST(GatewayPrefix, ChainedBlockHashesNameWholePrefixes) {
  const std::string a(300, 'a');
  std::string b = a;
  b[200] = 'b';  // differs in block 3 (bytes 192-255)
  const auto ha = prefix_block_hashes(a), hb = prefix_block_hashes(b);
  ASSERT_EQ(ha.size(), 4u);  // 300 / 64 full blocks
  ASSERT_EQ(hb.size(), 4u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(ha[i], hb[i]);
  EXPECT_NE(ha[3], hb[3]);
  EXPECT_TRUE(prefix_block_hashes(std::string(63, 'x')).empty());
  EXPECT_EQ(prefix_block_hashes(std::string(100'000, 'x')).size(), kMaxPrefixBlocks);

  using nlohmann::json;
  EXPECT_EQ(prefix_text(json{{"prompt", "hello"}}), "hello");
  EXPECT_EQ(prefix_text(json{{"prompt", {"first", "second"}}}), "first");
  EXPECT_EQ(prefix_text(json{{"prompt", {1, 2, 3}}}), "[1,2,3]");
  EXPECT_EQ(prefix_text(json{{"messages", {{{"role", "system"}, {"content", "S"}}, {{"role", "user"}, {"content", "U"}}}}}),
            "system\nS\nuser\nU\n");
  EXPECT_EQ(prefix_text(json::parse("[1]")), "");
  // The agent protocols: Anthropic's system then messages, the Responses
  // API's instructions then input; an agent's key first, as a whole block.
  EXPECT_EQ(prefix_text(json{{"system", "S"}, {"messages", {{{"role", "user"}, {"content", "U"}}}}}),
            "system\nS\nuser\nU\n");
  EXPECT_EQ(prefix_text(json{{"instructions", "I"}, {"input", "U"}}), "instructions\nI\nuser\nU\n");
  EXPECT_EQ(prefix_text(json{{"input", {{{"type", "function_call_output"}, {"output", "x"}}}}}).substr(0, 21),
            "function_call_output\n");
  const std::string keyed = prefix_text(json{{"prompt_cache_key", "thread-1"}, {"input", "U"}});
  ASSERT_EQ(keyed.size(), kPrefixBlockBytes + 7);
  EXPECT_EQ(prefix_block_hashes(keyed), prefix_block_hashes(prefix_text(
                                            json{{"prompt_cache_key", "thread-1"}, {"input", "Other"}})));
  EXPECT_NE(prefix_block_hashes(keyed), prefix_block_hashes(prefix_text(
                                            json{{"prompt_cache_key", "thread-2"}, {"input", "U"}})));
  EXPECT_EQ(prefix_text(json{{"metadata", {{"user_id", "u"}}}, {"messages", json::array()}}).size(), kPrefixBlockBytes);

  PrefixAffinity aff;
  EXPECT_FALSE(aff.lookup(ha).has_value());
  aff.record(ha, 2);
  const auto m = aff.lookup(hb);  // shares three blocks
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->replica, 2u);
  EXPECT_EQ(m->blocks, 3u);
}

TEST(GatewayLoad, ParsesLoadAndCorrectsItWithLocalInFlight) {
  EXPECT_FALSE(parse_load("not json").has_value());
  EXPECT_FALSE(parse_load(R"({"running":"x","waiting":0})").has_value());
  const auto l = parse_load(
      R"({"running":3,"waiting":2,"kv_used_blocks":10,"kv_total_blocks":40,"kv_utilization":0.25,"draining":true})");
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(l->running, 3);
  EXPECT_EQ(l->waiting, 2);
  EXPECT_TRUE(l->draining);
  LoadState s;
  s.begin_request();
  EXPECT_DOUBLE_EQ(s.score(), 1);  // no poll yet: in flight only
  s.on_poll(*l);                   // 5 queued, 1 of them ours
  EXPECT_DOUBLE_EQ(s.score(), 5 + LoadState::kKvWeight * 0.25);
  s.begin_request();
  s.begin_request();  // two more since the poll
  EXPECT_DOUBLE_EQ(s.score(), 7 + LoadState::kKvWeight * 0.25);
  s.end_request();
  s.end_request();
  s.end_request();
  EXPECT_DOUBLE_EQ(s.score(), 4 + LoadState::kKvWeight * 0.25);
  s.on_poll_failed();
  EXPECT_DOUBLE_EQ(s.score(), 0);
}

TEST(GatewayRouter, PoliciesPickAsDocumented) {
  EXPECT_EQ(policy_from_name("prefix"), PolicyKind::Prefix);
  EXPECT_FALSE(policy_from_name("random").has_value());
  Router rr(PolicyKind::RoundRobin, 0);
  const std::vector<Candidate> c{{0, 0}, {1, 0}, {2, 0}};
  std::vector<size_t> order;
  for (int i = 0; i < 6; ++i) order.push_back(rr.choose(c, {}).replica);
  EXPECT_EQ(order, (std::vector<size_t>{0, 1, 2, 0, 1, 2}));

  // Two choices never pick the busiest of three (it loses to either other).
  Router ll(PolicyKind::LeastLoad, 0);
  const std::vector<Candidate> loaded{{0, 1}, {1, 9}, {2, 2}};
  std::map<size_t, int> picks;
  for (int i = 0; i < 300; ++i) ++picks[ll.choose(loaded, {}).replica];
  EXPECT_EQ(picks[1], 0);
  EXPECT_GT(picks[0], picks[2]);  // 0 wins both of its pairs, 2 only one of its two

  // Prefix: sticks to the first choice while within the threshold, then overflows.
  Router px(PolicyKind::Prefix, 3);
  const auto h = prefix_block_hashes(std::string(256, 'p'));
  const RouteDecision first = px.choose(c, h);
  EXPECT_EQ(first.affinity, AffinityResult::Miss);
  for (int i = 0; i < 20; ++i) {
    const RouteDecision d = px.choose(c, h);
    EXPECT_EQ(d.replica, first.replica);
    EXPECT_EQ(d.affinity, AffinityResult::Hit);
  }
  std::vector<Candidate> busy = c;
  busy[first.replica].score = 4;  // 4 > 0 + 3
  const RouteDecision moved = px.choose(busy, h);
  EXPECT_EQ(moved.affinity, AffinityResult::Overflow);
  EXPECT_NE(moved.replica, first.replica);
  EXPECT_EQ(px.choose(c, h).replica, moved.replica);  // the prefix now lives there
}

TEST(GatewayAccessLog, LogfmtValuesAreQuotedOnlyWhenTheyMustBe) {
  using nexus::gateway::logfmt_value;
  EXPECT_EQ(logfmt_value("/v1/completions?x=1"), "\"/v1/completions?x=1\"");  // '=' would split the pair
  EXPECT_EQ(logfmt_value("/v1/models"), "/v1/models");
  EXPECT_EQ(logfmt_value("team a"), "\"team a\"");
  EXPECT_EQ(logfmt_value(""), "\"\"");
  EXPECT_EQ(logfmt_value("say \"hi\" \\ bye"), "\"say \\\"hi\\\" \\\\ bye\"");
  EXPECT_EQ(logfmt_value(std::string("a\nb\0c", 5)), "\"a\\x0ab\\x00c\"");
}

TEST(GatewayQueryOfDeath, AFingerprintThatKillsTwoReplicasIsRefusedForAWhile) {
  QueryOfDeath q({milliseconds(1000), milliseconds(5000)});
  const auto t0 = Clock::now();
  const uint64_t x = QueryOfDeath::fingerprint("POST /v1/completions", "{\"prompt\":\"x\"}");
  EXPECT_NE(x, QueryOfDeath::fingerprint("POST /v1/completions", "{\"prompt\":\"y\"}"));
  EXPECT_NE(x, QueryOfDeath::fingerprint("POST /v1/chat/completions", "{\"prompt\":\"x\"}"));
  EXPECT_EQ(x, QueryOfDeath::fingerprint("POST /v1/completions", "{\"prompt\":\"x\"}"));
  EXPECT_FALSE(q.refusing(t0));

  // Deaths on one replica (a kill -9 with many identical requests in
  // flight) keep it a suspect; one on a second replica within the window
  // makes it a query of death.
  EXPECT_EQ(q.record_death(x, 0, t0), QueryOfDeath::Death::Suspect);
  EXPECT_EQ(q.record_death(x, 0, t0 + milliseconds(10)), QueryOfDeath::Death::Suspect);
  EXPECT_FALSE(q.refused(x, t0 + milliseconds(10)));
  EXPECT_EQ(q.record_death(x, 1, t0 + milliseconds(20)), QueryOfDeath::Death::Detected);
  EXPECT_TRUE(q.refusing(t0 + milliseconds(20)));
  EXPECT_TRUE(q.refused(x, t0 + milliseconds(4000)));
  EXPECT_EQ(q.record_death(x, 2, t0 + milliseconds(30)), QueryOfDeath::Death::Refused);
  EXPECT_FALSE(q.refused(x, t0 + milliseconds(6000)));  // refuse_for after its detection (and its last death)
  EXPECT_FALSE(q.refusing(t0 + milliseconds(6000)));

  // A second death after the window is a first one again.
  const uint64_t y = QueryOfDeath::fingerprint("realtime", "{}");
  EXPECT_EQ(q.record_death(y, 0, t0), QueryOfDeath::Death::Suspect);
  EXPECT_EQ(q.record_death(y, 1, t0 + milliseconds(1500)), QueryOfDeath::Death::Suspect);
  EXPECT_EQ(q.record_death(y, 0, t0 + milliseconds(2000)), QueryOfDeath::Death::Detected);
}

TEST(GatewayQueryOfDeath, TheRegistryIsBoundedAndKeepsItsRefusals) {
  QueryOfDeath q({milliseconds(1000), milliseconds(600'000)});
  const auto t0 = Clock::now();
  const uint64_t bad = QueryOfDeath::fingerprint("k", "bad");
  q.record_death(bad, 0, t0);
  ASSERT_EQ(q.record_death(bad, 1, t0), QueryOfDeath::Death::Detected);
  // A death a millisecond for 12 s: suspects expire after the window, the
  // registry stays bounded, and the refusal (the oldest entry) is kept.
  for (uint64_t i = 0; i < 3 * QueryOfDeath::kMaxEntries; ++i) {
    q.record_death(i * 7919 + 1, 0, t0 + milliseconds(i));
    ASSERT_LE(q.size(), QueryOfDeath::kMaxEntries);
  }
  EXPECT_TRUE(q.refused(bad, t0 + milliseconds(3 * QueryOfDeath::kMaxEntries)));
  // Past the bound with nothing expired, the oldest go first, refusals too.
  QueryOfDeath full({milliseconds(600'000), milliseconds(600'000)});
  full.record_death(bad, 0, t0);
  full.record_death(bad, 1, t0);
  for (uint64_t i = 0; i < QueryOfDeath::kMaxEntries; ++i) full.record_death(i * 7919 + 1, 0, t0);
  EXPECT_EQ(full.size(), QueryOfDeath::kMaxEntries);
  EXPECT_FALSE(full.refused(bad, t0));
}

TEST(GatewayHttp, AbsoluteFormTargetsBecomeTheirPath) {
  using nexus::server::origin_form;
  EXPECT_EQ(origin_form("http://127.0.0.1:8080/v1/completions?x=1"), "/v1/completions?x=1");
  EXPECT_EQ(origin_form("HTTPS://gw.example/health"), "/health");
  EXPECT_EQ(origin_form("http://gw.example"), "/");
  EXPECT_EQ(origin_form("http://gw.example?q"), "/?q");
  EXPECT_FALSE(origin_form("/v1/completions"));
  EXPECT_FALSE(origin_form("*"));
}

TEST(GatewayLoad, AReplicaLoadNestedPastTheLimitIsRefused) {
  std::string deep = "{\"running\":0,\"waiting\":0,\"x\":" + std::string(100'000, '[') + std::string(100'000, ']') + "}";
  EXPECT_FALSE(parse_load(deep));
  EXPECT_TRUE(parse_load("{\"running\":0,\"waiting\":0,\"x\":[[1]]}"));
}
