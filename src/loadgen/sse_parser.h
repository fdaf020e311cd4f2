// SseParser: the client side of server-sent events, incremental.
//
// Follows the WHATWG HTML "Server-sent events" parsing rules: lines end in
// CRLF, LF or CR (a CRLF split across two feeds is still one line end);
// lines starting with ':' are comments; "field: value" drops one space after
// the colon; "data" lines accumulate (joined by '\n'); a blank line
// dispatches the event, unless it has no data. "id" and "retry" are ignored
// (a benchmark never reconnects). Bytes may be fed split anywhere.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace nexus::loadgen {

struct SseEvent {
  std::string event;  // the "event:" field; "" = default ("message")
  std::string data;
};

class SseParser {
 public:
  // Parses `bytes`; every event completed by them is appended to `out`.
  void feed(std::string_view bytes, std::vector<SseEvent>& out);
  // Whether an incomplete line or event is buffered (the stream ended early).
  bool pending() const { return !line_.empty() || has_data_; }

 private:
  void on_line(std::vector<SseEvent>& out);

  std::string line_;
  std::string data_, event_;
  bool has_data_ = false;
  bool skip_lf_ = false;  // the previous byte was a CR: a following LF belongs to it
  bool at_start_ = true;  // a leading UTF-8 BOM is ignored
};

}  // namespace nexus::loadgen
