// libFuzzer target: what `nexus gateway` reads from clients and replicas
// on its request path, without sockets (the proxy session's I/O is Beast's
// and Asio's; what the gateway itself parses is here):
//
//   the request target   absolute-form to origin-form (server::origin_form);
//   access checks        the key presented (Authorization, or a WebSocket
//                        subprotocol) against a key table, the tenant's
//                        buckets charged with a usage;
//   the body             read under the nesting limit, the prefix text and
//                        its block hashes (--policy prefix) with the
//                        affinity table, include_usage added to a stream
//                        (--api-keys), the fingerprint and deaths of the
//                        query-of-death registry;
//   a replica's stream   through the usage tap, split into reads at
//                        fuzzed places, stripping and not, with a small
//                        event limit; a non-streamed answer's usage;
//   realtime events      both ways through a session's transcript, then
//                        its replay.
//
// Findings besides ASan/UBSan reports and timeouts:
//   - a body the gateway rewrote (include_usage) that is not a JSON object
//     with stream_options.include_usage true;
//   - a tap that does not strip (the client asked for usage) relaying other
//     bytes than the replica sent, unless it overflowed;
//   - an origin-form target that does not start with '/';
//   - a replay or death-notice event that is not a JSON object with a
//     string "type"; a rewritten client message that is not a
//     response.create without previous_response_id.
#include <fuzzer/FuzzedDataProvider.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/api_keys.h"
#include "gateway/prefix_affinity.h"
#include "gateway/query_of_death.h"
#include "gateway/realtime_transcript.h"
#include "gateway/responses_transcript.h"
#include "gateway/stream_usage.h"
#include "gateway/tenant_limiter.h"
#include "server/api_key.h"
#include "server/request_framing.h"
#include "util/json_depth.h"

using namespace nexus::gateway;
using nlohmann::json;

namespace {

[[noreturn]] void finding(const char* what, std::string_view detail) {
  std::fprintf(stderr, "fuzz_gateway: %s\n%.*s\n", what, static_cast<int>(std::min<size_t>(detail.size(), 2000)),
               detail.data());
  std::abort();
}

const ApiKeyTable& keys() {
  static const ApiKeyTable t = parse_api_keys("sk-a team-a 5 100\nsk-b team-b - 1\nsk-c ops\n", "fuzz");
  return t;
}

void check_target(std::string_view target) {
  if (auto path = nexus::server::origin_form(target); path && (path->empty() || (*path)[0] != '/'))
    finding("an origin-form target without its leading '/'", *path);
}

void check_access(TenantLimiter& limiter, std::string_view auth, std::string_view protocols, const TokenUsage& usage,
                  std::chrono::steady_clock::time_point now) {
  const auto key = nexus::server::presented_key(auth, protocols);
  const std::string credential = key ? "Bearer " + std::string(*key) : std::string(auth);
  const AccessVerdict v = limiter.admit(credential, now);
  if (v.result == AccessResult::Admitted) limiter.charge(v.tenant, usage, now);
}

void check_body(std::string_view body, PrefixAffinity& affinity, QueryOfDeath& qod, uint8_t replica,
                std::chrono::steady_clock::time_point now) {
  // As ProxySession::body_json parses it (a body past the bound is the gateway's 400).
  nlohmann::ordered_json doc;
  try {
    doc = nexus::parse_json_bounded<nlohmann::ordered_json>(body);
  } catch (const nexus::JsonTooDeep&) {
    doc = nlohmann::ordered_json(nlohmann::ordered_json::value_t::discarded);
  } catch (const json::exception&) {
    doc = nlohmann::ordered_json(nlohmann::ordered_json::value_t::discarded);
  }
  const auto hashes = prefix_block_hashes(prefix_text(doc));
  if (affinity.lookup(hashes)) affinity.owned(replica % 4);
  affinity.record(hashes, replica % 4);
  if (auto r = with_stream_usage(doc)) {
    const json back = json::parse(r->body, nullptr, false);
    if (!back.is_object() || !back.contains("stream_options") || !back["stream_options"].is_object() ||
        back["stream_options"].value("include_usage", false) != true)
      finding("a rewritten stream body without include_usage", r->body);
  }
  usage_of_body(body);
  const uint64_t fp = QueryOfDeath::fingerprint("POST /v1/completions", body);
  qod.record_death(fp, replica % 3, now);
  qod.refused(fp, now);
}

void check_tap(std::string_view stream, FuzzedDataProvider& fdp) {
  StreamUsageTap strip(true, 4096), keep(false, 4096);
  std::string kept;
  size_t at = 0;
  while (at < stream.size()) {
    const size_t n = fdp.ConsumeIntegralInRange<size_t>(1, stream.size() - at);
    const std::string_view read = stream.substr(at, n);
    strip.feed(read);
    kept += keep.feed(read);
    at += n;
  }
  strip.flush();
  kept += keep.flush();
  if (!keep.overflowed() && kept != stream) finding("a tap that strips nothing changed the stream", kept);
}

void check_typed(const std::string& e, const char* what) {
  const json j = json::parse(e, nullptr, false);
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) finding(what, e);
}

// The events through a transcript, a move, then the events again (the
// client's rewritten where the transcript rewrites: each a response.create
// without previous_response_id).
void check_transcript(WsTranscript& t, const std::vector<std::string>& events) {
  auto feed = [&] {
    for (size_t i = 0; i < events.size(); ++i) {
      if (i % 2) {
        (void)t.on_server_event(events[i]);
      } else if (const auto r = t.on_client_event(events[i])) {
        const json j = json::parse(*r, nullptr, false);
        if (!j.is_object() || j.value("type", "") != "response.create" || j.contains("previous_response_id"))
          finding("a rewritten message that is not a response.create without previous_response_id", *r);
      }
    }
  };
  feed();
  if (t.lost()) return;
  for (const std::string& e : t.death_notice(true, "fuzz")) check_typed(e, "a death notice event without a type");
  for (const std::string& e : t.replay()) check_typed(e, "a replay event without a type");
  feed();
}

void check_ws_transcripts(const std::vector<std::string>& events) {
  RealtimeTranscript realtime(64 * 1024);
  check_transcript(realtime, events);
  ResponsesTranscript responses(64 * 1024);
  check_transcript(responses, events);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static PrefixAffinity affinity;
  static QueryOfDeath qod;
  FuzzedDataProvider fdp(data, size);
  const auto now = std::chrono::steady_clock::now();
  const uint8_t replica = fdp.ConsumeIntegral<uint8_t>();
  const std::string target = fdp.ConsumeRandomLengthString(256);
  const std::string auth = fdp.ConsumeRandomLengthString(128);
  const std::string protocols = fdp.ConsumeRandomLengthString(128);
  const std::string body = fdp.ConsumeRandomLengthString(64 * 1024);
  std::vector<std::string> events;
  for (int i = 0; i < 8 && fdp.remaining_bytes() > 0 && fdp.ConsumeBool(); ++i)
    events.push_back(fdp.ConsumeRandomLengthString(4096));
  const std::string stream = fdp.ConsumeRandomLengthString(64 * 1024);

  check_target(target);
  TenantLimiter limiter(keys(), now);
  check_access(limiter, auth, protocols, TokenUsage{static_cast<int64_t>(body.size()), replica}, now);
  check_body(body, affinity, qod, replica, now);
  check_tap(stream, fdp);
  check_ws_transcripts(events);
  return 0;
}
