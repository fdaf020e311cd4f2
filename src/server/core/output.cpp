#include "server/core/output.h"

#include <algorithm>

#include "server/tool_calls/stream.h"

namespace nexus::server {

void OutputDelta::append(OutputDelta later) {
  text += later.text;
  for (CallDelta& c : later.calls) {
    auto same = std::find_if(calls.begin(), calls.end(), [&](const CallDelta& d) { return d.index == c.index; });
    if (same == calls.end()) calls.push_back(std::move(c));
    else same->arguments += c.arguments;
  }
}

OutputStream::OutputStream(std::shared_ptr<const tool_calls::ToolCallSetup> tools) {
  if (tools) {
    forced_ = tools->forced;
    calls_ = std::make_unique<tool_calls::ToolCallStream>(std::move(tools));
  }
}

OutputStream::~OutputStream() = default;
OutputStream::OutputStream(OutputStream&&) noexcept = default;

void OutputStream::apply(const OutputDelta& d) {
  message_.text += d.text;
  for (const CallDelta& c : d.calls) {
    if (c.opens) message_.calls.push_back({c.id, c.name, c.arguments, false});
    else message_.calls[c.index].arguments += c.arguments;
  }
}

OutputDelta OutputStream::on_event(const GenerationEvent& ev) {
  if (done_) return {};
  OutputDelta delta;
  if (calls_) {
    delta = calls_->feed(ev.text, ev.token);
    if (ev.done && ev.finish != FinishReason::Error) delta.append(calls_->finish());
    if (forced_) delta.text.clear();  // a forced call cut short: its syntax is no answer
  } else {
    delta.text = ev.text;
  }
  apply(delta);
  if (!ev.done) return delta;
  done_ = true;
  if (calls_) {
    const OutputMessage parsed = calls_->message();
    for (size_t i = 0; i < parsed.calls.size() && i < message_.calls.size(); ++i)
      message_.calls[i].complete = parsed.calls[i].complete;
  }
  switch (ev.finish) {
    case FinishReason::Stop:
      if (!message_.calls.empty()) end_ = OutputEnd::ToolCalls;
      else if (!ev.stop_sequence.empty()) end_ = OutputEnd::StopSequence;
      else end_ = OutputEnd::Stop;
      break;
    case FinishReason::Length: end_ = OutputEnd::Length; break;
    case FinishReason::Cancelled: end_ = OutputEnd::Cancelled; break;
    case FinishReason::Error: end_ = OutputEnd::Error; break;
  }
  stop_sequence_ = ev.stop_sequence;
  return delta;
}

}  // namespace nexus::server
