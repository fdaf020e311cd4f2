#include "server/realtime_input_probe.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <string>
#include <vector>

#include "server/realtime_conversation.h"
#include "server/realtime_protocol.h"

namespace nexus::server::realtime {

namespace {

bool special(unsigned char c) { return c == '"' || c == '\\' || c < 0x20; }

// Index of the first '"', '\\' or control byte at or after `i` (n if none),
// 32 bytes a step (GCC/Clang vector extensions: vector compares on x86 and
// ARM): this pass is all that a refused message costs.
size_t next_special(const char* s, size_t i, size_t n) {
  using Bytes = unsigned char __attribute__((vector_size(32)));
  using Words = uint64_t __attribute__((vector_size(32)));
  while (i + sizeof(Bytes) <= n) {
    Bytes x;
    std::memcpy(&x, s + i, sizeof x);
    const Words hit = reinterpret_cast<Words>((x == '"') | (x == '\\') | (x < 0x20));
    if ((hit[0] | hit[1] | hit[2] | hit[3]) != 0) break;
    i += sizeof(Bytes);
  }
  for (; i < n; ++i)
    if (special(static_cast<unsigned char>(s[i]))) return i;
  return n;
}

int hex4(std::string_view s, size_t i) {  // -1 unless s[i..i+4) is 4 hex digits
  if (i + 4 > s.size()) return -1;
  int v = 0;
  for (size_t k = i; k < i + 4; ++k) {
    const char c = s[k];
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

struct StringScan {
  size_t end = 0;         // index of the closing quote
  uint64_t decoded = 0;   // bytes once unescaped
  bool valid = false;     // as RFC 8259 (and nlohmann::json) reads it
  bool marker = false;    // holds \u0001, which starts the skeleton's placeholders
};

// The string whose contents start at `i` (after its opening quote).
StringScan scan_string(std::string_view s, size_t i) {
  StringScan r;
  for (;;) {
    const size_t j = next_special(s.data(), i, s.size());
    r.decoded += j - i;
    if (j == s.size() || s[j] != '\\') {  // the end, or a raw control byte
      r.end = j;
      r.valid = j < s.size() && s[j] == '"';
      return r;
    }
    if (j + 1 >= s.size()) return r;
    switch (s[j + 1]) {
      case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
        r.decoded += 1;
        i = j + 2;
        continue;
      case 'u':
        break;
      default:
        return r;
    }
    const int cp = hex4(s, j + 2);
    if (cp < 0 || (cp >= 0xDC00 && cp <= 0xDFFF)) return r;  // a low surrogate must follow a high one
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      const int low = j + 7 < s.size() && s[j + 6] == '\\' && s[j + 7] == 'u' ? hex4(s, j + 8) : -1;
      if (low < 0xDC00 || low > 0xDFFF) return r;
      r.decoded += 4;
      i = j + 12;
      continue;
    }
    r.marker = r.marker || cp == 1;
    r.decoded += cp < 0x80 ? 1 : cp < 0x800 ? 2 : 3;
    i = j + 6;
  }
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

}  // namespace

std::optional<uint64_t> probe_input_append(std::string_view frame) {
  std::string skeleton;
  std::vector<uint64_t> long_sizes;  // decoded bytes of the placeholders' strings, by index
  size_t copied = 0;                 // frame[0, copied) is in the skeleton
  for (size_t i = 0;;) {
    // Outside strings a quote can only open one (anything else there is the
    // skeleton parse's to judge).
    const size_t open = frame.find('"', i);
    if (open == std::string_view::npos) break;
    const StringScan str = scan_string(frame, open + 1);
    if (!str.valid || str.marker) return std::nullopt;
    i = str.end + 1;
    if (str.end - (open + 1) < kLongString) continue;
    size_t next = i;
    while (next < frame.size() && is_space(frame[next])) ++next;
    if (next < frame.size() && frame[next] == ':') return std::nullopt;  // a long key
    skeleton.append(frame.substr(copied, open + 1 - copied));
    skeleton += "\\u0001" + std::to_string(long_sizes.size());
    long_sizes.push_back(str.decoded);
    copied = str.end;  // its closing quote goes with the next piece
  }
  if (long_sizes.empty()) return std::nullopt;  // nothing to save
  skeleton.append(frame.substr(copied));

  ClientEvent ev;
  try {
    ev = parse_client_event(skeleton);
  } catch (const EventError&) {
    return std::nullopt;
  }
  if (ev.type != EventType::InputAppend || !ev.input) return std::nullopt;
  const InputItem& item = *ev.input;
  // The one long field an input.append can have; role is short, or the
  // parse above refused its placeholder.
  const std::string& field = item.is_message ? item.message.content : item.text;
  uint64_t bytes = input_bytes(item);
  if (field.size() >= 2 && field[0] == '\x01') {
    // Only a placeholder starts with \x01 here (a string holding \u0001 was turned away).
    size_t k = 0;
    const auto [end, ec] = std::from_chars(field.data() + 1, field.data() + field.size(), k);
    if (ec != std::errc() || end != field.data() + field.size() || k >= long_sizes.size()) return std::nullopt;
    bytes = bytes - field.size() + long_sizes[k];
  }
  return bytes;
}

}  // namespace nexus::server::realtime
