#include "server/responses/responses_request.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "server/api_error.h"
#include "server/core/request_fields.h"
#include "server/openai_tools.h"
#include "server/responses/response_store.h"
#include "server/responses/responses_formatter.h"
#include "util/json_depth.h"

namespace nexus::server {

namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

// Hosted tools: the server would run them itself (OpenAI's API reference,
// "Tools"); Nexus cannot, so the model is not told of them.
bool hosted_tool(const std::string& type) {
  static const char* const kHosted[] = {"web_search", "web_search_preview", "web_search_2025_08_26",
                                        "web_search_preview_2025_03_11", "file_search", "code_interpreter",
                                        "computer_use_preview", "computer_use", "image_generation", "mcp",
                                        "local_shell", "custom", "tool_search", "apply_patch", "shell"};
  return std::any_of(std::begin(kHosted), std::end(kHosted), [&](const char* k) { return type == k; });
}

ApiError unknown_value(const std::string& param, const std::string& what, const std::string& value,
                       const char* expected) {
  return bad_request(fmt::format("Invalid '{}': {} '{}' is not supported; expected {}.", param, what, printable(value),
                                 expected),
                     param, "invalid_value");
}

// The text of a message's content: a string, or parts of the types the role may carry.
std::string content_text(const ojson& content, const std::string& where) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw type_error(where, "a string or an array of content parts", content);
  std::string text;
  for (size_t j = 0; j < content.size(); ++j) {
    const ojson& part = content[j];
    const std::string pw = fmt::format("{}[{}]", where, j);
    if (!part.is_object()) throw type_error(pw, "an object", part);
    const auto type = part.find("type");
    if (type == part.end() || !type->is_string())
      throw bad_request(fmt::format("Missing required parameter: '{}.type'.", pw), pw + ".type",
                        "missing_required_parameter");
    const std::string t = type->get<std::string>();
    const bool text_part = t == "input_text" || t == "output_text" || t == "text" || t == "refusal";
    if (!text_part) {
      if (t == "input_image" || t == "input_file" || t == "input_audio")
        throw bad_request(fmt::format("Unsupported content part '{}' in '{}': this server takes text only.", t, pw),
                          pw + ".type", "unsupported_content");
      throw unknown_value(pw + ".type", "the content part type", t, "input_text or output_text");
    }
    const auto tx = part.find(t == "refusal" ? "refusal" : "text");
    if (tx == part.end() || !tx->is_string())
      throw bad_request(fmt::format("Missing required parameter: '{}.text'.", pw), pw + ".text",
                        "missing_required_parameter");
    text += tx->get<std::string>();
  }
  return text;
}

std::string required_string(const ojson& obj, const char* name, const std::string& where) {
  const ojson* v = field(obj, name);
  if (!v)
    throw bad_request(fmt::format("Missing required parameter: '{}.{}'.", where, name), where + "." + name,
                      "missing_required_parameter");
  if (!v->is_string()) throw type_error(where + "." + name, "a string", *v);
  return v->get<std::string>();
}

// The input's items -> messages appended to `out`; `calls` maps the call
// ids issued so far (the continued transcript's and this input's) to names.
void parse_items(const ojson& input, std::vector<ChatMessage>& out, std::map<std::string, std::string>& calls,
                 ojson& items) {
  if (input.is_string()) {
    out.push_back({"user", input.get<std::string>(), nullptr, "", ""});
    items.push_back({{"id", make_responses_id("msg_")}, {"type", "message"}, {"role", "user"},
                     {"content", ojson::array({{{"type", "input_text"}, {"text", input.get<std::string>()}}})}});
    return;
  }
  if (!input.is_array()) throw type_error("input", "a string or an array of items", input);
  for (size_t i = 0; i < input.size(); ++i) {
    const ojson& item = input[i];
    const std::string where = fmt::format("input[{}]", i);
    if (!item.is_object()) throw type_error(where, "an object", item);
    std::string type = "message";
    if (const ojson* t = field(item, "type")) {
      if (!t->is_string()) throw type_error(where + ".type", "a string", *t);
      type = t->get<std::string>();
    }
    ojson kept = item;  // as given, with an id when it had none (GET .../input_items lists them by id)
    if (!kept.contains("id")) kept["id"] = make_responses_id(type == "message" ? "msg_" : type == "function_call" ? "fc_" : "fco_");
    items.push_back(std::move(kept));
    if (type == "message") {
      std::string role = required_string(item, "role", where);
      if (role == "developer") role = "system";
      if (role != "system" && role != "user" && role != "assistant")
        throw unknown_value(where + ".role", "the role", role, "system, developer, user or assistant");
      const ojson* content = field(item, "content");
      if (!content)
        throw bad_request(fmt::format("Missing required parameter: '{}.content'.", where), where + ".content",
                          "missing_required_parameter");
      out.push_back({role, content_text(*content, where + ".content"), nullptr, "", ""});
    } else if (type == "function_call") {
      const std::string call_id = required_string(item, "call_id", where);
      const std::string name = required_string(item, "name", where);
      const std::string arguments = required_string(item, "arguments", where);
      calls[call_id] = name;
      ojson call = {{"id", call_id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", arguments}}}};
      // Calls join the assistant turn they follow (text first, then calls).
      if (out.empty() || out.back().role != "assistant") out.push_back({"assistant", "", ojson::array(), "", ""});
      if (!out.back().tool_calls.is_array()) out.back().tool_calls = ojson::array();
      out.back().tool_calls.push_back(std::move(call));
    } else if (type == "function_call_output") {
      const std::string call_id = required_string(item, "call_id", where);
      const auto issued = calls.find(call_id);
      if (issued == calls.end())
        throw bad_request(fmt::format("No tool call found for function call output with call_id '{}'.",
                                      printable(call_id)),
                          where + ".call_id", "invalid_value");
      const ojson* output = field(item, "output");
      if (!output)
        throw bad_request(fmt::format("Missing required parameter: '{}.output'.", where), where + ".output",
                          "missing_required_parameter");
      out.push_back({"tool", content_text(*output, where + ".output"), nullptr, call_id, issued->second});
    } else {
      throw unknown_value(where + ".type", "the item type", type, "message, function_call or function_call_output");
    }
  }
}

void parse_function_tool(const ojson& t, const std::string& where, ResponsesRequest& r) {
  for (const auto& kv : t.items()) {
    const std::string& k = kv.key();
    if (k != "type" && k != "name" && k != "description" && k != "parameters" && k != "strict")
      throw bad_request(fmt::format("Unrecognized parameter: '{}.{}'.", where, printable(k)), where + "." + k,
                        "unknown_parameter");
  }
  if (const ojson* strict = field(t, "strict"); strict && !strict->is_boolean())
    throw type_error(where + ".strict", "a boolean", *strict);
  add_tool(r.conversation.tool_use,
           checked_tool(field(t, "name"), field(t, "description"), field(t, "parameters"), where, "parameters",
                        /*compile=*/false),
           where);
}

void parse_tools(const ojson& doc, ResponsesRequest& r, bool strict_tools) {
  ToolRequest& tr = r.conversation.tool_use;
  if (const ojson* tools = field(doc, "tools")) {
    if (!tools->is_array()) throw type_error("tools", "an array", *tools);
    for (size_t i = 0; i < tools->size(); ++i) {
      const ojson& t = (*tools)[i];
      const std::string where = fmt::format("tools[{}]", i);
      if (!t.is_object()) throw type_error(where, "an object", t);
      const ojson* type = field(t, "type");
      if (!type || !type->is_string())
        throw bad_request(fmt::format("Missing required parameter: '{}.type'.", where), where + ".type",
                          "missing_required_parameter");
      const std::string ty = type->get<std::string>();
      if (ty == "function") {
        parse_function_tool(t, where, r);
        r.tools_echo.push_back(t);
      } else if (ty == "namespace") {
        const ojson* inner = field(t, "tools");
        if (!inner || !inner->is_array())
          throw type_error(where + ".tools", "an array of function tools", inner ? *inner : ojson());
        for (size_t j = 0; j < inner->size(); ++j) {
          const std::string iw = fmt::format("{}.tools[{}]", where, j);
          if (!(*inner)[j].is_object()) throw type_error(iw, "an object", (*inner)[j]);
          parse_function_tool((*inner)[j], iw, r);
        }
        r.tools_echo.push_back(t);
      } else if (hosted_tool(ty)) {
        if (strict_tools)
          throw bad_request(fmt::format("Unsupported tool '{}' in '{}': this server cannot run hosted tools "
                                        "(started with --strict-tools).", ty, where),
                            where + ".type", "unsupported_tool");
        r.dropped_tools.push_back(ty);
      } else {
        throw unknown_value(where + ".type", "the tool type", ty, "function, namespace or a hosted tool");
      }
    }
    if (!tr.tools.empty()) tr.choice = ToolChoice::Auto;
  }
  if (const ojson* c = field(doc, "tool_choice")) {
    r.tool_choice = json::parse(c->dump());
    if (c->is_string()) {
      const std::string s = c->get<std::string>();
      if (s == "auto") tr.choice = tr.tools.empty() ? ToolChoice::None : ToolChoice::Auto;
      else if (s == "none") tr.choice = ToolChoice::None;
      else if (s == "required") tr.choice = ToolChoice::Required;
      else throw unknown_value("tool_choice", "the mode", s, "none, auto, required or {\"type\": \"function\", \"name\"}");
    } else if (c->is_object()) {
      const ojson* type = field(*c, "type");
      const ojson* name = field(*c, "name");
      if (!type || !type->is_string() || type->get<std::string>() != "function" || !name || !name->is_string())
        throw bad_request("Invalid 'tool_choice': expected {\"type\": \"function\", \"name\": ...}; hosted tool "
                          "choices are not supported.", "tool_choice", "invalid_value");
      tr.choice = ToolChoice::Named;
      tr.named = name->get<std::string>();
    } else {
      throw type_error("tool_choice", "a string or an object", *c);
    }
  }
  if (const ojson* p = field(doc, "parallel_tool_calls")) {
    if (!p->is_boolean()) throw type_error("parallel_tool_calls", "a boolean", *p);
    tr.parallel = p->get<bool>();
  }
  check_choice(tr, r.conversation.grammar != nullptr, "tool_choice");
  // The template's list (and, for a template without tool support, the
  // system message explaining them: tool_calls/request.h) reads template_tools.
  tr.template_tools = tr.active() ? template_tools(tr.tools) : ojson();
  r.conversation.tools = tr.template_tools;
}

void parse_text_format(const ojson& doc, ResponsesRequest& r) {
  const ojson* text = field(doc, "text");
  if (!text) return;
  if (!text->is_object()) throw type_error("text", "an object", *text);
  for (const auto& kv : text->items())
    if (kv.key() != "format" && kv.key() != "verbosity")
      throw bad_request(fmt::format("Unrecognized parameter: 'text.{}'.", printable(kv.key())), "text." + kv.key(),
                        "unknown_parameter");
  const ojson* f = field(*text, "format");
  if (!f) return;
  if (!f->is_object()) throw type_error("text.format", "an object", *f);
  const std::string type = required_string(*f, "type", "text.format");
  r.text_format = json::parse(f->dump());
  r.conversation.grammar_param = "text.format";
  if (type == "text") return;
  if (type == "json_object") {
    r.conversation.grammar = json_object_grammar();
    return;
  }
  if (type != "json_schema") throw unknown_value("text.format.type", "the format", type, "text, json_object or json_schema");
  if (const ojson* strict = field(*f, "strict"); strict && !strict->is_boolean())
    throw type_error("text.format.strict", "a boolean", *strict);
  const ojson* schema = field(*f, "schema");
  if (!schema)
    throw bad_request("Missing required parameter: 'text.format.schema'.", "text.format.schema",
                      "missing_required_parameter");
  if (!schema->is_object()) throw type_error("text.format.schema", "an object (a JSON schema)", *schema);
  r.conversation.grammar = schema_grammar(*schema, "text.format.schema");
}

// Fields accepted without effect (see the header); everything else a 400.
bool accepted_field(const std::string& k) {
  static const char* const kKnown[] = {
      "model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls", "text", "max_output_tokens",
      "temperature", "top_p", "top_k", "min_p", "seed", "frequency_penalty", "presence_penalty", "repeat_penalty",
      "stream", "store", "previous_response_id", "reasoning", "include", "metadata", "prompt_cache_key",
      "client_metadata", "truncation", "service_tier", "user", "safety_identifier", "background", "priority",
      "generate", "stream_options", "prompt_cache_retention", "max_tool_calls", "top_logprobs", "ignore_eos"};
  return std::any_of(std::begin(kKnown), std::end(kKnown), [&](const char* n) { return k == n; });
}

}  // namespace

ResponsesRequest parse_responses_request(std::string_view body, const ResponseStore& store,
                                         const ResponsesParseOptions& opts, const ResponseStore* connection) {
  const json doc = parse_json_body(body);
  const ojson odoc = parse_json_bounded<ojson>(body);  // parsed once already: cannot fail (keeps schema order)
  for (const auto& kv : doc.items())
    if (!accepted_field(kv.key()))
      throw bad_request(fmt::format("Unrecognized parameter: '{}'.", printable(kv.key())), kv.key(),
                        "unknown_parameter");

  ResponsesRequest r;
  ConversationRequest& c = r.conversation;
  c.endpoint = Endpoint::Responses;
  c.messages_param = "input";
  c.max_tokens_param = "max_output_tokens";
  if (auto m = get_string(doc, "model")) c.model = *m;
  if (auto s = get_string(doc, "instructions")) r.instructions = *s;
  r.max_output_tokens = get_integer(doc, "max_output_tokens");
  c.max_tokens = r.max_output_tokens;
  if (!c.max_tokens && opts.n_ctx > 0) c.max_tokens = opts.n_ctx;  // the rest of the context (build_generation)
  parse_sampling(doc, c);
  c.priority = parse_priority(doc, opts.max_priority);
  c.stream = get_bool(doc, "stream").value_or(false);
  r.store = get_bool(doc, "store").value_or(true);
  if (const json* g = field(doc, "generate")) {
    if (!opts.websocket)
      throw bad_request("Unrecognized parameter: 'generate' (the WebSocket mode's field).", "generate",
                        "unknown_parameter");
    if (!g->is_boolean()) throw type_error("generate", "a boolean", *g);
    r.generate = g->get<bool>();
  }
  if (get_bool(doc, "background").value_or(false))
    throw bad_request("Unsupported parameter: 'background' responses are not supported; leave it false.",
                      "background", "unsupported_parameter");
  if (const json* m = field(doc, "metadata")) {
    if (!m->is_object()) throw type_error("metadata", "an object", *m);
    r.metadata = *m;
  }
  if (const json* v = field(doc, "top_logprobs"); v && !(v->is_number_integer() && v->get<int64_t>() == 0))
    throw bad_request("Unsupported parameter: 'top_logprobs' is not supported on /v1/responses.", "top_logprobs",
                      "unsupported_parameter");
  parse_text_format(odoc, r);
  parse_tools(odoc, r, opts.strict_tools);

  std::map<std::string, std::string> calls;
  if (auto prev = get_string(doc, "previous_response_id")) {
    r.previous_response_id = *prev;
    auto stored = connection ? connection->get(*prev) : nullptr;
    if (!stored) stored = store.get(*prev);
    if (!stored)
      throw bad_request(fmt::format("Previous response with id '{}' not found.", printable(*prev)),
                        "previous_response_id", "previous_response_not_found");
    r.transcript = stored->transcript;
    for (const ChatMessage& m : r.transcript)
      if (m.tool_calls.is_array())
        for (const auto& call : m.tool_calls) calls[call["id"].get<std::string>()] = call["function"]["name"];
  }
  const ojson* input = field(odoc, "input");
  if (!input) throw bad_request("Missing required parameter: 'input'.", "input", "missing_required_parameter");
  parse_items(*input, r.transcript, calls, r.input_items);
  if (r.transcript.empty()) throw bad_request("Invalid 'input': it holds no items.", "input", "invalid_value");
  if (!r.instructions.empty()) c.messages.push_back({"system", r.instructions, nullptr, "", ""});
  c.messages.insert(c.messages.end(), r.transcript.begin(), r.transcript.end());
  return r;
}

}  // namespace nexus::server
