#include "server/prompt_builder.h"

#include <algorithm>

#include <fmt/format.h>

#include "grammar/matcher.h"
#include "server/api_error.h"
#include "server/tool_calls/grammar.h"
#include "server/tool_calls/request.h"

namespace nexus::server {

namespace {


// What the grammar will need of the matcher, checked before the engine
// sees it (grammar/matcher.h check_followable): a grammar past a bound is
// the request's 400, not a 500 in the middle of generation.
void check_grammar(const std::shared_ptr<const grammar::Grammar>& g, const std::string& param) {
  try {
    grammar::check_followable(g);
  } catch (const grammar::GrammarLimit& e) {
    throw bad_request(fmt::format("Invalid '{}': {}", param, printable(e.what())), param, "grammar_too_complex");
  }
}

}  // namespace

std::vector<int32_t> prompt_tokens(const ConversationRequest& req, const Backend& backend) {
  if (req.endpoint != Endpoint::Completions) {
    const ChatTemplate& t = backend.chat_template();
    return tokenize_chat(backend, t.render(tool_calls::prompt_messages(req.messages, req.tool_use, t), req.tools,
                                           req.add_generation_prompt));
  }
  if (!req.prompt_is_tokens) return backend.tokenize(req.prompt, true);
  std::vector<int32_t> ids;
  ids.reserve(req.prompt_tokens.size());
  for (int64_t t : req.prompt_tokens) {
    if (t < 0 || t >= backend.n_vocab()) {
      throw bad_request(fmt::format("Invalid 'prompt': token id {} is outside the vocabulary [0, {}).", t,
                                    backend.n_vocab()),
                        "prompt", "invalid_value");
    }
    ids.push_back(static_cast<int32_t>(t));
  }
  return ids;
}

std::string echo_text(const ConversationRequest& req, const Backend& backend) {
  if (!req.echo) return {};
  if (!req.prompt_is_tokens) return req.prompt;
  std::vector<int32_t> ids(req.prompt_tokens.begin(), req.prompt_tokens.end());  // checked by build_generation
  return backend.detokenize(ids);
}

std::vector<int32_t> tokenize_chat(const Backend& backend, const std::string& text) {
  const ChatTemplate& t = backend.chat_template();
  return t.starts_with_bos(text) ? backend.tokenize_continuation(text, t.parse_special())
                                 : backend.tokenize(text, t.parse_special());
}

void check_max_tokens(std::optional<int64_t> max_tokens, int32_t n_ctx, const std::string& param) {
  if (!max_tokens) return;
  // (Values beyond int64 were refused when the request was parsed.)
  const int64_t v = *max_tokens;
  const std::string shown = std::to_string(v);
  if (v <= 0) {
    throw bad_request(fmt::format("Invalid '{}': expected a value >= 1, but got {}.", param, shown), param,
                      "invalid_value");
  }
  if (v > n_ctx) {
    throw bad_request(
        fmt::format("Invalid '{}': {} exceeds this model's context length of {} tokens.", param, shown, n_ctx), param,
        "invalid_value");
  }
}

GenerationRequest build_generation(const ConversationRequest& req, const Backend& backend) {
  if (!req.model.empty() && req.model != backend.model_id()) {
    throw bad_request(fmt::format("The model '{}' does not exist; this server serves '{}'.", printable(req.model),
                                  backend.model_id()),
                      "model", "model_not_found");
  }
  const int32_t n_ctx = backend.n_ctx();
  const bool score_only = req.echo && req.max_tokens == 0;  // the prompt's logprobs, no completion
  if (!score_only) check_max_tokens(req.max_tokens, n_ctx, req.max_tokens_param);

  GenerationRequest g;
  // The grammar first: its check costs milliseconds, the prompt's rendering
  // and tokenization more (a tool grammar's schemas are in the prompt too).
  g.grammar = req.grammar;
  if (req.tool_use.forced())
    g.grammar = tool_calls::forced_grammar(req.tool_use, tool_calls::syntax_for(backend.chat_template()));
  if (g.grammar) check_grammar(g.grammar, req.tool_use.forced() ? "tools" : req.grammar_param);
  g.prompt = prompt_tokens(req, backend);
  const std::string param = req.endpoint == Endpoint::Completions ? "prompt" : req.messages_param;
  if (g.prompt.empty()) throw bad_request(fmt::format("Invalid '{}': it encodes to no tokens.", param), param, "invalid_value");
  const auto n_prompt = static_cast<int64_t>(g.prompt.size());
  if (n_prompt >= n_ctx) {
    throw bad_request(fmt::format("This model's maximum context length is {} tokens. However, the {} {} {} "
                                  "tokens, which leaves no room for a completion.",
                                  n_ctx, param, param == "messages" ? "take" : "takes", n_prompt),
                      param, "context_length_exceeded");
  }
  const int64_t wanted = req.max_tokens.value_or(kDefaultMaxTokens);
  g.sampling = req.sampling;
  for (const auto& [id, bias] : req.logit_bias) {
    if (id < 0 || id >= backend.n_vocab())
      throw bad_request(fmt::format("Invalid 'logit_bias': token id {} is outside the vocabulary [0, {}).", id,
                                    backend.n_vocab()),
                        "logit_bias", "invalid_value");
    g.sampling.logit_bias.emplace_back(static_cast<int32_t>(id), bias);
  }
  g.stop.max_tokens = static_cast<int32_t>(std::min<int64_t>(wanted, n_ctx - n_prompt));
  g.stop.stop = req.stop;
  g.stop.ignore_eos = req.ignore_eos;
  g.priority = req.priority;
  if (req.prediction) g.prediction = backend.tokenize_as_output(*req.prediction);
  g.prompt_logprobs = req.echo && req.sampling.logprobs >= 0;
  return g;
}

}  // namespace nexus::server
