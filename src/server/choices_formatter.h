// ChoicesFormatter: the response of a request with n choices (OpenAI's `n`),
// from the engine events of its n generations, one per choice.
//
// Each choice is a generation of its own (choices.h: same prompt, its own
// seed), formatted by its own CompletionFormatter (openai_response.h) with
// "index" = the choice. n = 1 is exactly CompletionFormatter's output.
// For n > 1:
//   non-streaming  one body when every choice has ended: "choices" ordered by
//                  index; "usage" counts the prompt once (OpenAI's rule):
//                  prompt_tokens and cached_tokens are choice 0's,
//                  completion_tokens the sum over the choices; "timings"
//                  are choice 0's.
//   streaming      each choice's chunks as they come (interleaved, told apart
//                  by "index"; chat: a role chunk per index first), each
//                  choice's finish_reason chunk when it ends; once all have
//                  ended, the usage chunk (include_usage; the same sums) and
//                  [DONE].
// A choice that fails (FinishReason::Error) ends the whole response: a 500
// body, or, streaming, its SSE error event and [DONE]; finished() turns true
// and the caller cancels the other choices.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "server/core/response_formatter.h"
#include "server/openai_response.h"

namespace nexus::server {

class ChoicesFormatter final : public ResponseFormatter {
 public:
  ChoicesFormatter(ResponseMeta meta, int32_t n);

  int32_t n() const { return static_cast<int32_t>(choices_.size()); }
  bool stream() const override { return meta_.stream; }
  // Streaming only: what to send right after the headers.
  std::string stream_preamble() override;
  // The bytes for this event of choice `index` (in [0, n)); see above. Events
  // after finished() yield "".
  std::string on_event(const GenerationEvent& ev, int32_t index) override;
  // Every choice has ended, or one failed: the response is complete.
  bool finished() const override { return finished_; }
  int status() const override { return status_; }  // 200, or 500 after an Error event (non-streaming)
  // OpenAI's error body; in a stream an event {"error": ...} and [DONE].
  HttpReply error_reply(const ApiError& e) const override;
  std::string stream_error(const ApiError& e) const override;
  const ResponseMeta& meta() const { return meta_; }

 private:
  std::string merged_body() const;

  ResponseMeta meta_;
  std::vector<std::unique_ptr<CompletionFormatter>> choices_;
  std::vector<std::string> bodies_;  // non-streaming: each ended choice's body
  std::vector<bool> done_;
  int32_t n_done_ = 0;
  Usage usage_;                      // summed as described above
  bool finished_ = false;
  int status_ = 200;
};

}  // namespace nexus::server
