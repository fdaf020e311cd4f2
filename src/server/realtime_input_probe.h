// The size of a large input.append, known without parsing its text (issue 26,
// realtime flood). A 900 KB input.append costs ~5 ms of JSON parsing (the
// DOM copies the text a byte at a time) before append_input can compare its
// size with the context's room and refuse it; 4 clients flooding such
// messages kept the 2 cores of a small box busy with parses whose result was
// thrown away, and normal streams' ITL p99 went from ~0.4 ms to ~3 ms.
//
// probe_input_append() reads the message once at memchr-like speed: each
// string of kLongString raw bytes or more is checked (its escapes, no raw
// control characters) and measured in decoded bytes, and a copy of the message
// with those strings replaced by short placeholders (the skeleton, a few
// hundred bytes) goes through realtime::parse_client_event. When that yields
// an input.append, the result is the input's size in bytes as input_bytes()
// counts it (exact for `text` and `message.content`, the only long fields
// such an event has); the full parse would have produced the same event,
// since no check of parse_client_event depends on a long string's contents.
//
// Anything else (not JSON, a long string with a bad escape, a long object key,
// another event type, an event parse_client_event refuses) returns nullopt:
// the caller parses the message in full as before, which gives the exact
// error. The probe never refuses anything itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace nexus::server::realtime {

// Strings this long (raw bytes between the quotes) are measured, not parsed.
inline constexpr size_t kLongString = 1024;

// The input bytes (input_bytes() of its InputItem) of `frame` when it is a
// valid input.append event; nullopt otherwise or when unsure. `frame` is
// valid UTF-8 (a WebSocket text message, which Beast has checked): the probe
// does not check the encoding inside long strings.
std::optional<uint64_t> probe_input_append(std::string_view frame);

}  // namespace nexus::server::realtime
