#include "server/openai_request.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "server/api_error.h"
#include "server/core/request_fields.h"
#include "server/openai_tools.h"
#include "server/openai_prediction.h"
#include "server/request_priority.h"
#include "server/choices.h"
#include "util/error.h"
#include "util/json_depth.h"

namespace nexus::server {

using nlohmann::json;

bool is_valid_utf8(std::string_view s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) { ++i; continue; }
    size_t len;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; }
    else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; }
    else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; }
    else return false;
    if (i + len > n) return false;
    for (size_t k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

namespace {

void parse_prompt(const json& body, ConversationRequest& r) {
  const json* p = field(body, "prompt");
  if (!p) throw bad_request("Missing required parameter: 'prompt'.", "prompt", "missing_required_parameter");
  if (p->is_string()) { r.prompt = p->get<std::string>(); return; }
  if (!p->is_array()) throw type_error("prompt", "a string or an array", *p);
  if (p->empty()) throw bad_request("Invalid 'prompt': the array is empty.", "prompt", "empty_array");
  const json* tokens = p;
  if ((*p)[0].is_string()) {
    if (p->size() != 1) {
      throw bad_request("Invalid 'prompt': only one prompt per request is supported.", "prompt", "invalid_value");
    }
    r.prompt = (*p)[0].get<std::string>();
    return;
  }
  if ((*p)[0].is_array()) {  // [[ids...]]
    if (p->size() != 1) {
      throw bad_request("Invalid 'prompt': only one prompt per request is supported.", "prompt", "invalid_value");
    }
    tokens = &(*p)[0];
  }
  for (const json& t : *tokens) {
    if (!t.is_number_integer()) {
      throw bad_request("Invalid 'prompt': expected a string, an array of one string, or an array of token ids.",
                        "prompt", "invalid_type");
    }
    r.prompt_tokens.push_back(t.is_number_unsigned() && t.get<uint64_t>() > INT64_MAX ? INT64_MAX : t.get<int64_t>());
  }
  if (r.prompt_tokens.empty()) throw bad_request("Invalid 'prompt': the token array is empty.", "prompt", "empty_array");
  r.prompt_is_tokens = true;
}

std::string message_content(const json& m, size_t i, const std::string& role) {
  const std::string name = fmt::format("messages[{}].content", i);
  const json* c = field(m, "content");
  if (!c) {
    if (role == "assistant") return "";  // e.g. a turn that only made tool calls
    throw bad_request(fmt::format("Missing required parameter: '{}'.", name), name, "missing_required_parameter");
  }
  if (c->is_string()) return c->get<std::string>();
  if (!c->is_array()) throw type_error(name, "a string or an array of content parts", *c);
  std::string text;
  for (size_t k = 0; k < c->size(); ++k) {
    const json& part = (*c)[k];
    const std::string pname = fmt::format("{}[{}]", name, k);
    if (!part.is_object()) throw type_error(pname, "an object", part);
    const json* type = field(part, "type");
    if (!type || !type->is_string() || type->get<std::string>() != "text") {
      throw bad_request(fmt::format("Invalid '{}.type': only \"text\" content parts are supported.", pname),
                        pname + ".type", "invalid_value");
    }
    const json* t = field(part, "text");
    if (!t || !t->is_string()) throw type_error(pname + ".text", "a string", t ? *t : json());
    if (k > 0) text += '\n';
    text += t->get<std::string>();
  }
  return text;
}

// tool_calls (assistant), tool_call_id, name: what a chat template renders
// of tool use. A call needs function.name (string) and function.arguments
// (a string, or an object).
void parse_message_extras(const json& m, const std::string& name, const std::string& role, ChatMessage& msg) {
  for (const char* key : {"tool_call_id", "name"}) {
    const json* v = field(m, key);
    if (!v) continue;
    if (!v->is_string()) throw type_error(name + "." + key, "a string", *v);
    (std::string_view(key) == "name" ? msg.name : msg.tool_call_id) = v->get<std::string>();
  }
  const json* calls = field(m, "tool_calls");
  if (!calls) return;
  const std::string cname = name + ".tool_calls";
  if (role != "assistant") {
    throw bad_request(fmt::format("Invalid '{}': only assistant messages carry tool calls.", cname), cname,
                      "invalid_value");
  }
  if (!calls->is_array()) throw type_error(cname, "an array", *calls);
  for (size_t k = 0; k < calls->size(); ++k) {
    const json& c = (*calls)[k];
    const std::string pname = fmt::format("{}[{}]", cname, k);
    if (!c.is_object()) throw type_error(pname, "an object", c);
    const json* f = field(c, "function");
    if (!f || !f->is_object()) throw type_error(pname + ".function", "an object", f ? *f : json());
    const json* fn = field(*f, "name");
    if (!fn || !fn->is_string()) throw type_error(pname + ".function.name", "a string", fn ? *fn : json());
    const json* args = field(*f, "arguments");
    if (args && !args->is_string() && !args->is_object()) {
      throw type_error(pname + ".function.arguments", "a string", *args);
    }
  }
  msg.tool_calls = nlohmann::ordered_json(*calls);  // (the body's nesting is bounded: util/json_depth.h)
}

void parse_messages(const json& body, ConversationRequest& r) {
  const json* ms = field(body, "messages");
  if (!ms) throw bad_request("Missing required parameter: 'messages'.", "messages", "missing_required_parameter");
  if (!ms->is_array()) throw type_error("messages", "an array", *ms);
  if (ms->empty()) {
    throw bad_request("Invalid 'messages': empty array. Expected an array with minimum length 1.", "messages",
                      "empty_array");
  }
  for (size_t i = 0; i < ms->size(); ++i) {
    const json& m = (*ms)[i];
    const std::string name = fmt::format("messages[{}]", i);
    if (!m.is_object()) throw type_error(name, "an object", m);
    const json* role = field(m, "role");
    if (!role) throw bad_request(fmt::format("Missing required parameter: '{}.role'.", name), name + ".role",
                                 "missing_required_parameter");
    if (!role->is_string()) throw type_error(name + ".role", "a string", *role);
    std::string rs = role->get<std::string>();
    if (rs == "developer") rs = "system";
    if (rs != "system" && rs != "user" && rs != "assistant" && rs != "tool") {
      throw bad_request(fmt::format("Invalid '{}.role': '{}' is not one of system, developer, user, assistant, tool.",
                                    name, printable(rs)),
                        name + ".role", "invalid_value");
    }
    ChatMessage msg;
    msg.content = message_content(m, i, rs);
    parse_message_extras(m, name, rs, msg);
    msg.role = std::move(rs);
    r.messages.push_back(std::move(msg));
  }
}

void parse_stop(const json& body, ConversationRequest& r) {
  const json* s = field(body, "stop");
  if (!s) return;
  if (s->is_string()) {
    if (!s->get<std::string>().empty()) r.stop.push_back(s->get<std::string>());
    return;
  }
  if (!s->is_array()) throw type_error("stop", "a string or an array of strings", *s);
  if (s->size() > 4) throw bad_request("Invalid 'stop': at most 4 stop sequences are allowed.", "stop", "invalid_value");
  for (const json& e : *s) {
    if (!e.is_string()) throw type_error("stop", "a string or an array of strings", e);
    if (!e.get<std::string>().empty()) r.stop.push_back(e.get<std::string>());
  }
}


// logprobs: chat takes `logprobs` (bool) + `top_logprobs` (0..20); legacy
// completions take `logprobs` as the number of alternatives (0..5), as
// OpenAI's references define them.
void parse_logprobs(const json& body, ConversationRequest& r) {
  if (r.endpoint == Endpoint::ChatCompletions) {
    const bool on = get_bool(body, "logprobs").value_or(false);
    const auto top = get_integer(body, "top_logprobs");
    if (top && (*top < 0 || *top > kMaxTopLogprobs))
      throw bad_request(fmt::format("Invalid 'top_logprobs': expected a value from 0 to {}, but got {}.", kMaxTopLogprobs, *top),
                        "top_logprobs", "invalid_value");
    if (top && *top > 0 && !on)
      throw bad_request("Invalid 'top_logprobs': 'logprobs' must be set to true when 'top_logprobs' is used.",
                        "top_logprobs", "invalid_value");
    r.sampling.logprobs = on ? static_cast<int32_t>(top.value_or(0)) : -1;
    return;
  }
  if (field(body, "top_logprobs"))
    throw bad_request("Invalid 'top_logprobs': a chat completions parameter; completions take 'logprobs' (0 to 5).",
                      "top_logprobs", "invalid_value");
  if (const json* v = field(body, "logprobs"); v && v->is_boolean()) throw type_error("logprobs", "an integer", *v);
  if (const auto k = get_integer(body, "logprobs")) {
    if (*k < 0 || *k > 5)
      throw bad_request(fmt::format("Invalid 'logprobs': expected a value from 0 to 5, but got {}.", *k), "logprobs",
                        "invalid_value");
    r.sampling.logprobs = static_cast<int32_t>(*k);
  }
}

// response_format {"type": "json_schema", "json_schema": {"name", "schema",
// "strict"}}: the schema compiled to a grammar. Read again from the raw body
// as an ordered_json, so that the properties keep the schema's order.
std::shared_ptr<const grammar::Grammar> response_format_grammar(const json& rf, std::string_view raw) {
  const json* js = field(rf, "json_schema");
  if (!js) throw bad_request("Missing required parameter: 'response_format.json_schema'.", "response_format.json_schema",
                             "missing_required_parameter");
  if (!js->is_object()) throw type_error("response_format.json_schema", "an object", *js);
  if (const json* strict = field(*js, "strict"); strict && !strict->is_boolean())
    throw type_error("response_format.json_schema.strict", "a boolean", *strict);
  const auto doc = parse_json_bounded<nlohmann::ordered_json>(raw);  // parsed once already: cannot fail
  const auto& ojs = doc.at("response_format").at("json_schema");
  const auto it = ojs.find("schema");
  const nlohmann::ordered_json schema =
      it == ojs.end() || it->is_null() ? nlohmann::ordered_json::object() : *it;
  return schema_grammar(schema, "response_format.json_schema.schema");
}

// response_format {"type": "text" | "json_object" | "json_schema"} and
// Nexus's `grammar` (GBNF text, llama.cpp's field): the grammar the output
// must follow.
void parse_grammar(const json& body, std::string_view raw, ConversationRequest& r) {
  const json* rf = field(body, "response_format");
  const json* g = field(body, "grammar");
  std::string type = "text";
  if (rf) {
    if (!rf->is_object()) throw type_error("response_format", "an object", *rf);
    const json* t = field(*rf, "type");
    if (!t || !t->is_string())
      throw bad_request("Missing required parameter: 'response_format.type'.", "response_format.type",
                        "missing_required_parameter");
    type = t->get<std::string>();
    if (type != "text" && type != "json_object" && type != "json_schema")
      throw bad_request(fmt::format("Invalid 'response_format.type': '{}' is not one of text, json_object, json_schema.",
                                    printable(type)),
                        "response_format.type", "invalid_value");
  }
  if (g && !g->is_string()) throw type_error("grammar", "a string (GBNF)", *g);
  if (g && type != "text")
    throw bad_request("Invalid 'grammar': it cannot be combined with a 'response_format' other than text.", "grammar",
                      "invalid_value");
  r.grammar_param = g ? "grammar" : "response_format";
  if (type == "json_schema") {
    r.grammar = response_format_grammar(*rf, raw);
    return;
  }
  try {
    if (type == "json_object") {
      r.grammar = json_object_grammar();
    } else if (g && !g->get_ref<const std::string&>().empty()) {
      r.grammar = std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(g->get<std::string>()));
    }
  } catch (const Error& e) {
    throw bad_request(fmt::format("Invalid 'grammar': {}", printable(e.what())), "grammar", "invalid_value");
  }
}

// logit_bias: {"<token id>": bias in [-100, 100]}; the ids' range against
// the vocabulary is checked in prompt_builder.
void parse_logit_bias(const json& body, ConversationRequest& r) {
  const json* b = field(body, "logit_bias");
  if (!b) return;
  if (!b->is_object()) throw type_error("logit_bias", "an object mapping token ids to numbers", *b);
  for (const auto& [key, value] : b->items()) {
    int64_t id = -1;
    const bool digits = !key.empty() && key.size() <= 18 &&
                        std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (digits) id = std::stoll(key);
    if (!digits)
      throw bad_request(fmt::format("Invalid 'logit_bias': key '{}' is not a token id.", printable(key)), "logit_bias",
                        "invalid_value");
    if (!value.is_number()) throw type_error("logit_bias", "an object mapping token ids to numbers", value);
    const double v = value.get<double>();
    if (!(v >= -100 && v <= 100))
      throw bad_request(fmt::format("Invalid 'logit_bias': the bias of token {} must be in [-100, 100], got {}.", id, v),
                        "logit_bias", "invalid_value");
    r.logit_bias.emplace_back(id, static_cast<float>(v));
  }
}

}  // namespace

namespace {

// "interactive" | "default" | "batch" | an integer in [kPriorityMin, kPriorityMax],
// at most max_priority (server/request_priority.h).

// Fields of OpenAI's API this server does not implement: refused when they
// ask for something (a client would otherwise get a silent wrong answer),
// accepted when they ask for nothing (false, 0, [], "text").
void refuse_unsupported(const json& doc) {
  auto refuse = [](const char* name) {
    return bad_request(fmt::format("Unsupported parameter: '{}' is not supported by this server.", name), name,
                       "unsupported_parameter");
  };
  auto asks = [](const json& v) {
    if (v.is_boolean()) return v.get<bool>();
    if (v.is_number()) return v.get<double>() != 0;
    if (v.is_string()) return !v.get_ref<const std::string&>().empty();  // json::empty() is false for any string
    if (v.is_array() || v.is_object()) return !v.empty();
    return true;
  };
  for (const char* name : {"functions", "function_call", "suffix"})
    if (const json* v = field(doc, name); v && asks(*v)) throw refuse(name);

}

// n: 1..kMaxChoices (choices.h); best_of: absent or equal to n (Nexus
// returns every sequence it generates, so it has none to choose among).
void parse_choices(const json& doc, ConversationRequest& r) {
  if (auto n = get_integer(doc, "n")) {
    if (*n < 1 || *n > kMaxChoices)
      throw bad_request(fmt::format("Invalid 'n': expected a value from 1 to {}, but got {}.", kMaxChoices, *n), "n",
                        "invalid_value");
    r.n = static_cast<int32_t>(*n);
  }
  if (auto b = get_integer(doc, "best_of"); b && *b != r.n)
    throw bad_request(fmt::format("Unsupported value: 'best_of' must equal 'n' ({}); choosing the best of more "
                                  "sequences than are returned is not supported.",
                                  r.n),
                      "best_of", "unsupported_value");
}

// echo (completions): the prompt's text before the completion, and with
// logprobs its tokens' log-probabilities (engine.h prompt_logprobs); then
// max_tokens may be 0 (scoring). Not with stream (the prompt's logprobs
// would have no chunk of their own); chat has no echo.
void parse_echo(const json& doc, ConversationRequest& r) {
  const bool echo = get_bool(doc, "echo").value_or(false);
  if (!echo) return;
  if (r.endpoint == Endpoint::ChatCompletions)
    throw bad_request("Unsupported parameter: 'echo' is a completions parameter.", "echo", "unsupported_parameter");
  if (get_bool(doc, "stream").value_or(false))
    throw bad_request("Invalid 'echo': it cannot be combined with 'stream'.", "echo", "invalid_value");
  r.echo = true;
}

}  // namespace

void parse_sampling(const json& body, ConversationRequest& r) {
  r.ignore_eos = get_bool(body, "ignore_eos").value_or(false);
  SamplingParams& s = r.sampling;
  if (auto v = get_number(body, "temperature", 0, 2)) s.temperature = static_cast<float>(*v);
  if (auto v = get_number(body, "top_p", 0, 1)) s.top_p = static_cast<float>(*v);
  if (auto v = get_number(body, "min_p", 0, 1)) s.min_p = static_cast<float>(*v);
  if (auto v = get_number(body, "frequency_penalty", -2, 2)) s.frequency_penalty = static_cast<float>(*v);
  if (auto v = get_number(body, "presence_penalty", -2, 2)) s.presence_penalty = static_cast<float>(*v);
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (auto v = get_number(body, "repeat_penalty", -kInf, kInf)) {
    if (!(*v > 0 && *v <= 1e9))  // one message for both ends (0 itself divides by zero)
      throw bad_request(fmt::format("Invalid 'repeat_penalty': expected a value in (0, 1e9], but got {} instead.", *v),
                        "repeat_penalty", "invalid_value");
    s.repeat_penalty = static_cast<float>(*v);
  }
  if (auto v = get_integer(body, "top_k")) {
    if (*v < 0 || *v > std::numeric_limits<int32_t>::max())
      throw bad_request(fmt::format("Invalid 'top_k': expected a value from 0 to {}.", std::numeric_limits<int32_t>::max()),
                        "top_k", "invalid_value");
    s.top_k = static_cast<int32_t>(*v);
  }
  if (auto v = get_integer(body, "seed")) s.seed = static_cast<uint64_t>(*v);
}

int32_t parse_priority(const json& doc, int32_t max_priority) {
  const json* p = field(doc, "priority");
  if (p == nullptr) return kPriorityDefault;
  const auto names_or_integer = [] {
    return bad_request("Invalid 'priority': use \"interactive\", \"default\", \"batch\" or an integer.", "priority",
                       "invalid_value");
  };
  const auto capped = [max_priority](int32_t priority) {
    if (priority > max_priority) throw priority_above_cap(priority, max_priority, "this server");
    return priority;
  };
  if (p->is_string()) {
    if (const std::optional<int32_t> c = priority_class(p->get_ref<const std::string&>())) return capped(*c);
    throw names_or_integer();
  }
  if (!p->is_number()) throw names_or_integer();
  const double d = p->get<double>();
  if (d != std::floor(d)) throw names_or_integer();
  auto v = get_integer(doc, "priority");
  if (!v || *v < kPriorityMin || *v > kPriorityMax)
    throw bad_request(fmt::format("Invalid 'priority': an integer must be in [{}, {}].", kPriorityMin, kPriorityMax),
                      "priority", "invalid_value");
  return capped(static_cast<int32_t>(*v));
}

std::shared_ptr<const grammar::Grammar> schema_grammar(const nlohmann::ordered_json& schema, const std::string& param) {
  try {
    return std::make_shared<const grammar::Grammar>(grammar::compile_json_schema(schema));
  } catch (const Error& e) {
    throw bad_request(fmt::format("Invalid '{}': {}", param, printable(e.what())), param, "invalid_value");
  }
}

std::shared_ptr<const grammar::Grammar> json_object_grammar() {
  static const auto g = std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(grammar::json_object_gbnf()));
  return g;
}

json parse_json_body(std::string_view body) {
  if (!is_valid_utf8(body)) throw bad_request("The request body is not valid UTF-8.", "", "invalid_utf8");
  json doc;
  try {
    doc = parse_json_bounded(body);
  } catch (const JsonTooDeep& e) {
    throw nesting_too_deep(e.limit);
  } catch (const json::exception& e) {
    throw bad_request(fmt::format("We could not parse the JSON body of your request: {}", e.what()), "",
                      "invalid_json");
  }
  if (!doc.is_object()) throw bad_request("The request body must be a JSON object.", "", "invalid_json");
  return doc;
}

ConversationRequest parse_openai_request(Endpoint endpoint, std::string_view body, int32_t max_priority) {
  const json doc = parse_json_body(body);
  refuse_unsupported(doc);

  ConversationRequest r;
  r.endpoint = endpoint;
  if (const json* m = field(doc, "model")) {
    if (!m->is_string()) throw type_error("model", "a string", *m);
    r.model = m->get<std::string>();
  }
  if (endpoint == Endpoint::Completions) parse_prompt(doc, r);
  else parse_messages(doc, r);

  r.max_tokens = get_integer(doc, "max_tokens");
  if (endpoint == Endpoint::ChatCompletions) {
    if (auto v = get_integer(doc, "max_completion_tokens")) {
      r.max_tokens = v;
      r.max_tokens_param = "max_completion_tokens";
    }
  }
  parse_choices(doc, r);
  parse_echo(doc, r);
  parse_sampling(doc, r);
  parse_logprobs(doc, r);
  parse_logit_bias(doc, r);
  parse_grammar(doc, body, r);
  if (endpoint == Endpoint::ChatCompletions) {
    r.tool_use = parse_tools(doc, body, r.grammar != nullptr);
    r.tools = r.tool_use.template_tools;
  } else {
    for (const char* name : {"tools", "tool_choice", "parallel_tool_calls"})
      if (field(doc, name))
        throw bad_request(fmt::format("Unsupported parameter: '{}' is a chat completions parameter.", name), name,
                          "unsupported_parameter");
  }
  parse_stop(doc, r);
  r.priority = parse_priority(doc, max_priority);
  r.prediction = parse_prediction(doc);
  r.stream = get_bool(doc, "stream").value_or(false);
  if (const json* so = field(doc, "stream_options")) {
    if (!so->is_object()) throw type_error("stream_options", "an object", *so);
    r.include_usage = get_bool(*so, "include_usage").value_or(false);
  }
  return r;
}

}  // namespace nexus::server
