// libFuzzer target: realtime::probe_input_append (server/realtime_input_probe.h),
// the hand-written skim of large input.append messages that lets the server
// refuse an oversized input without parsing it, against the full parse
// (realtime::parse_client_event) it must agree with.
//
// Input: one WebSocket text message. Inputs that are not valid UTF-8 are
// skipped: a text message reaches the probe only after Beast checked its
// encoding, and the probe does not check it again inside long strings (the
// first run found exactly that: invalid UTF-8 the full parse refuses).
// Findings besides
// ASan/UBSan reports: a probe answer for a message the full parse refuses or
// reads as another event, or a size other than input_bytes() of the parsed
// item. The probe may always answer "unsure" (nullopt): that is never a
// finding. Its long-string path starts at kLongString (1024) raw bytes, so
// run with -max_len of a few KiB (docs/fuzzing.md).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "server/openai_request.h"
#include "server/realtime_conversation.h"
#include "server/realtime_events.h"
#include "server/realtime_input_probe.h"

using namespace nexus::server::realtime;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view frame(reinterpret_cast<const char*>(data), size);
  if (!nexus::server::is_valid_utf8(frame)) return 0;
  const std::optional<uint64_t> probed = probe_input_append(frame);
  if (!probed) return 0;
  std::optional<uint64_t> parsed;
  try {
    const ClientEvent ev = parse_client_event(frame);
    if (ev.type == EventType::InputAppend) parsed = input_bytes(*ev.input);
  } catch (const EventError&) {
  }
  if (parsed != probed) {
    std::fprintf(stderr, "fuzz_realtime_probe: probe %llu, full parse %s%llu\n",
                 static_cast<unsigned long long>(*probed), parsed ? "" : "refused/other ",
                 static_cast<unsigned long long>(parsed.value_or(0)));
    std::abort();
  }
  return 0;
}
