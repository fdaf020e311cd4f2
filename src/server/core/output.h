// The neutral output of a generation: what every protocol front-end renders
// (OpenAI chat and completions, Responses, Anthropic Messages), in none of
// their shapes.
//
// OutputStream is the pipeline's last shared stage. The engine has already
// detokenized and withheld stop strings (engine/sequence.h); the stream
// runs the text through the tool-call parser (tool_calls/stream.h) when the
// request offered tools, and says per GenerationEvent what the output gained:
//   OutputDelta  text that cannot start a call, and per call its first piece
//                (`opens`: id and name) or more of its arguments' JSON text.
// The deltas of a whole output concatenate exactly to message(). end() says
// why the output ended, from the final event (FinishReason) and what the
// parser saw: ToolCalls replaces Stop when the output holds calls; a call
// cut by max_tokens leaves Length and its OutputCall::complete false, so no
// protocol passes a half call off as a finished one. Under a forced tool
// choice the output is call syntax only: text the parser gives up on (a
// call cut before its name) is dropped, never returned as an answer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace nexus::server {

namespace tool_calls {
struct ToolCallSetup;
class ToolCallStream;
}  // namespace tool_calls

struct CallDelta {
  size_t index = 0;        // the call's position in the output (0, 1, ...)
  bool opens = false;      // the call's first delta: id and name are set
  std::string id;          // "call_…" (tool_calls/stream.h), when opens
  std::string name;        // the tool's name, when opens
  std::string arguments;   // more of the arguments' JSON text (may be "")
};

struct OutputDelta {
  std::string text;
  std::vector<CallDelta> calls;

  bool empty() const { return text.empty() && calls.empty(); }
  // `later` after this one, as one delta: texts joined, pieces of the same
  // call joined (when one event yields two deltas).
  void append(OutputDelta later);
};

struct OutputCall {
  std::string id;
  std::string name;
  std::string arguments;   // JSON text as the model wrote it
  bool complete = false;   // its closing brace was seen (false: cut short)
};

struct OutputMessage {
  std::string text;
  std::vector<OutputCall> calls;
};

// Why an output ended (the protocols' finish_reason / status / stop_reason).
enum class OutputEnd {
  Stop,          // an end-of-generation token
  StopSequence,  // one of the request's stop strings (OutputStream::stop_sequence())
  Length,        // max_tokens or the context's end
  ToolCalls,     // stopped after one or more tool calls
  Cancelled,
  Error,
};

class OutputStream {
 public:
  // `tools`: the parser setup of a request whose output may hold calls
  // (tool_calls/request.h response_setup); null: the output is text.
  explicit OutputStream(std::shared_ptr<const tool_calls::ToolCallSetup> tools);
  ~OutputStream();
  OutputStream(OutputStream&&) noexcept;

  // What `ev` adds to the output (the final event: what the parser still
  // held included). Events after the final one add nothing.
  OutputDelta on_event(const GenerationEvent& ev);

  const OutputMessage& message() const { return message_; }
  bool done() const { return done_; }
  OutputEnd end() const { return end_; }                 // once done()
  const std::string& stop_sequence() const { return stop_sequence_; }  // OutputEnd::StopSequence
  bool has_tools() const { return calls_ != nullptr; }

 private:
  void apply(const OutputDelta& d);

  std::unique_ptr<tool_calls::ToolCallStream> calls_;
  bool forced_ = false;  // ToolCallSetup::forced: text is dropped
  OutputMessage message_;
  bool done_ = false;
  OutputEnd end_ = OutputEnd::Stop;
  std::string stop_sequence_;
};

}  // namespace nexus::server
