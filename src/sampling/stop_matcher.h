// StopMatcher: finds stop strings in streamed text.
//
// Text arrives in deltas (one per generated token, each valid UTF-8). A stop
// string may be split across any number of deltas, so the matcher holds back
// the longest tail of the text that is still a prefix of some stop string and
// releases it once it can no longer start one. When a stop string completes,
// the text before it is released and everything from the stop string on is
// dropped (OpenAI: "the returned text will not contain the stop sequence").
// The earliest match in the text wins; among stop strings matching at the
// same position, the first listed.
//
// Held-back text is at most (longest stop string - 1) bytes, so each feed
// costs O(delta + longest stop * number of stop strings).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace nexus {

class StopMatcher {
 public:
  // Empty strings in `stops` are ignored; no stop strings = pass-through.
  explicit StopMatcher(std::vector<std::string> stops);

  struct Result {
    std::string text;     // safe to emit now
    bool stopped = false; // a stop string completed (text is what came before it)
    std::string stop;     // which one, when stopped
  };

  // Adds `delta`. After a stop, further feeds return empty results with
  // stopped = true.
  Result feed(std::string_view delta);

  // End of the stream without a stop: releases the held-back text.
  std::string flush();

  bool stopped() const { return stopped_; }
  const std::string& which() const { return which_; }  // the stop string that matched ("" before a stop)
  size_t held_bytes() const { return pending_.size(); }

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  bool stopped_ = false;
  std::string which_;
};

}  // namespace nexus
