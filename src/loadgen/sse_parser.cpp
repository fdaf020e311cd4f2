#include "loadgen/sse_parser.h"

namespace nexus::loadgen {

void SseParser::feed(std::string_view bytes, std::vector<SseEvent>& out) {
  for (size_t i = 0; i < bytes.size(); ++i) {
    const char c = bytes[i];
    if (skip_lf_) {
      skip_lf_ = false;
      if (c == '\n') continue;
    }
    if (c == '\r' || c == '\n') {
      skip_lf_ = c == '\r';
      on_line(out);
      line_.clear();
      continue;
    }
    line_ += c;
    if (at_start_ && line_.size() == 3) {
      if (line_ == "\xEF\xBB\xBF") line_.clear();
      at_start_ = false;
    }
  }
}

void SseParser::on_line(std::vector<SseEvent>& out) {
  at_start_ = false;
  if (line_.empty()) {
    if (has_data_) out.push_back(SseEvent{event_, data_});
    data_.clear();
    event_.clear();
    has_data_ = false;
    return;
  }
  if (line_[0] == ':') return;  // comment (keep-alive pings)
  const size_t colon = line_.find(':');
  std::string_view field = line_, value;
  if (colon != std::string::npos) {
    field = std::string_view(line_).substr(0, colon);
    value = std::string_view(line_).substr(colon + 1);
    if (!value.empty() && value[0] == ' ') value.remove_prefix(1);
  }
  if (field == "data") {
    if (has_data_) data_ += '\n';
    data_ += value;
    has_data_ = true;
  } else if (field == "event") {
    event_ = value;
  }
}

}  // namespace nexus::loadgen
