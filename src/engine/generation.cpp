#include "engine/generation.h"

#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <optional>

#include "engine/engine_metrics.h"
#include "model/llama_context.h"
#include "sampling/sampler.h"
#include "sampling/stop_matcher.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace nexus {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// Throws nexus::Error describing the first problem with the request.
void validate(const GenerationRequest& req, int32_t n_ctx, int32_t n_vocab) {
  if (req.prompt.empty()) throw Error("the prompt is empty (it needs at least one token)");
  if (static_cast<int64_t>(req.prompt.size()) >= n_ctx)
    throw Error(fmt::format("the prompt has {} tokens but the context holds {} (prompt + 1 generated token must fit)",
                            req.prompt.size(), n_ctx));
  for (size_t i = 0; i < req.prompt.size(); ++i) {
    const int32_t id = req.prompt[i];
    if (id < 0 || id >= n_vocab)
      throw Error(fmt::format("prompt token {} at position {} is outside the vocabulary [0, {})", id, i, n_vocab));
  }
  if (req.stop.max_tokens <= 0) throw Error(fmt::format("max_tokens must be positive (got {})", req.stop.max_tokens));
  Sampler::validate(req.sampling);
}

// Prefill: keep the longest common prefix of what the cache holds and the
// prompt, evaluate the rest in one batch. At least the last prompt token is
// evaluated, since its logits choose the first generated token.
std::span<const float> prefill(SequenceState& seq, const std::vector<int32_t>& prompt, int32_t& reused) {
  if (seq.cached.size() != static_cast<size_t>(seq.ctx.n_past())) {  // out of sync: start over
    seq.ctx.truncate(0);
    seq.cached.clear();
  }
  size_t common = 0;
  while (common < seq.cached.size() && common < prompt.size() && seq.cached[common] == prompt[common]) ++common;
  common = std::min(common, prompt.size() - 1);
  seq.ctx.truncate(static_cast<int32_t>(common));
  seq.cached.resize(common);
  reused = static_cast<int32_t>(common);
  std::span<const int32_t> rest(prompt.data() + common, prompt.size() - common);
  std::span<const float> logits = seq.ctx.eval(rest);
  seq.cached.insert(seq.cached.end(), rest.begin(), rest.end());
  return logits;
}

class Generation {
 public:
  Generation(SequenceState& seq, const Tokenizer& tok, GenerationJob& job)
      : seq_(seq), tok_(tok), job_(job), start_(Clock::now()) {
    usage_.prompt_tokens = static_cast<int32_t>(job.req.prompt.size());
    timings_.queue_s = seconds(job.submitted, start_);
  }

  void run();

  // Reports `message` as the final event unless one was already sent.
  void fail(const std::string& message) noexcept {
    if (final_sent_) return;
    try {
      GenerationEvent ev;
      ev.error = message;
      finish(ev, FinishReason::Error);
    } catch (...) {
      // The callback threw on the error event too: nothing more to tell it.
    }
  }

 private:
  bool cancelled() const { return job_.handle && job_.handle->cancelled(); }

  // Fills in the final fields and delivers the event.
  void finish(GenerationEvent& ev, FinishReason reason) {
    ev.done = true;
    ev.finish = reason;
    ev.usage = usage_;
    if (n_sampled_ > 0) timings_.decode_s = seconds(first_token_, last_token_);
    ev.timings = timings_;
    if (seq_.metrics) seq_.metrics->observe_request(request_record(ev, seconds(job_.submitted, Clock::now()), reused_));
    final_sent_ = true;  // before the call: a throwing callback must not get a second final event
    job_.on_event(ev);
  }

  // Releases text held back by the decoder and the stop matcher at the end.
  std::string flush_text(StopMatcher& stop, StreamDecoder& dec, bool& hit_stop) {
    StopMatcher::Result r = stop.feed(dec.flush());
    if (r.stopped) {
      hit_stop = true;
      return std::move(r.text);
    }
    return r.text + stop.flush();
  }

  SequenceState& seq_;
  const Tokenizer& tok_;
  GenerationJob& job_;
  Clock::time_point start_, first_token_, last_token_;
  Usage usage_;
  Timings timings_;
  int32_t n_sampled_ = 0;
  int32_t reused_ = 0;  // prompt tokens whose K/V the cache already held
  bool final_sent_ = false;
};

void Generation::run() {
  const GenerationRequest& req = job_.req;
  validate(req, seq_.ctx.n_ctx(), seq_.n_vocab);
  if (cancelled()) {
    GenerationEvent ev;
    return finish(ev, FinishReason::Cancelled);
  }

  std::span<const float> logits = prefill(seq_, req.prompt, reused_);
  timings_.prefill_s = seconds(start_, Clock::now());
  if (seq_.metrics) seq_.metrics->observe_step(timings_.prefill_s, usage_.prompt_tokens - reused_, 1);

  Sampler sampler(req.sampling, seq_.n_vocab);
  StreamDecoder decoder(tok_);
  StopMatcher stop(req.stop.stop);
  std::vector<int32_t> history = req.prompt;  // what the penalties look at
  history.reserve(static_cast<size_t>(seq_.ctx.n_ctx()) + 1);
  std::vector<float> row;  // the sampler edits its logits; the context's stay intact

  for (;;) {
    if (cancelled()) {
      GenerationEvent ev;
      return finish(ev, FinishReason::Cancelled);
    }
    row.assign(logits.begin(), logits.end());
    const int32_t id = sampler.sample(row, history);
    const Clock::time_point prev_token = last_token_;
    last_token_ = Clock::now();
    if (n_sampled_++ == 0) {
      first_token_ = last_token_;
      timings_.ttft_s = seconds(job_.submitted, first_token_);
    } else if (seq_.metrics) {
      seq_.metrics->observe_itl(seconds(prev_token, last_token_));
    }
    usage_.completion_tokens = n_sampled_;
    history.push_back(id);

    GenerationEvent ev;
    ev.token = id;
    std::optional<FinishReason> reason;
    bool hit_stop = false;
    if (!req.stop.ignore_eos && tok_.is_eog(id)) {
      ev.text = flush_text(stop, decoder, hit_stop);
      reason = FinishReason::Stop;
    } else {
      // A model vocabulary larger than the tokenizer's has ids without text.
      StopMatcher::Result r = stop.feed(id < tok_.n_vocab() ? decoder.push(id) : std::string());
      ev.text = std::move(r.text);
      if (r.stopped) {
        reason = FinishReason::Stop;
      } else if (n_sampled_ >= req.stop.max_tokens || seq_.ctx.n_past() >= seq_.ctx.n_ctx()) {
        ev.text += flush_text(stop, decoder, hit_stop);
        reason = hit_stop ? FinishReason::Stop : FinishReason::Length;
      }
    }
    if (reason) return finish(ev, *reason);
    job_.on_event(ev);

    const Clock::time_point step_start = Clock::now();
    logits = seq_.ctx.eval(std::span<const int32_t>(&id, 1));
    if (seq_.metrics) seq_.metrics->observe_step(seconds(step_start, Clock::now()), 1, 1);
    seq_.cached.push_back(id);
  }
}

}  // namespace

void run_generation(SequenceState& seq, const Tokenizer& tok, GenerationJob& job) {
  Generation g(seq, tok, job);
  try {
    g.run();
  } catch (const std::exception& e) {
    g.fail(e.what());
  } catch (...) {
    g.fail("unknown error during generation");
  }
}

void finish_unrun(GenerationJob& job, FinishReason reason, const std::string& error) {
  GenerationEvent ev;
  ev.done = true;
  ev.finish = reason;
  ev.error = error;
  ev.usage.prompt_tokens = static_cast<int32_t>(job.req.prompt.size());
  ev.timings.queue_s = std::chrono::duration<double>(Clock::now() - job.submitted).count();
  try {
    job.on_event(ev);
  } catch (...) {
    // Shutting down: a throwing callback changes nothing.
  }
}

}  // namespace nexus
