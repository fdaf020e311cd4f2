#include "server/anthropic/messages_request.h"

#include <map>
#include <set>

#include <fmt/format.h>

#include "server/api_error.h"
#include "server/core/request_fields.h"
#include "server/openai_tools.h"
#include "util/json_depth.h"

namespace nexus::server {

namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

ApiError missing(const std::string& param) {
  return bad_request(fmt::format("Missing required parameter: '{}'.", param), param, "missing_required_parameter");
}

std::string string_at(const ojson& obj, const char* name, const std::string& where) {
  const ojson* v = field(obj, name);
  if (!v) throw missing(where + "." + name);
  if (!v->is_string()) throw type_error(where + "." + name, "a string", *v);
  return v->get<std::string>();
}

// Text of a string or of text blocks (system, tool_result content).
std::string text_of(const ojson& v, const std::string& where) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) throw type_error(where, "a string or an array of text blocks", v);
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string bw = fmt::format("{}[{}]", where, i);
    if (!v[i].is_object()) throw type_error(bw, "an object", v[i]);
    const std::string type = string_at(v[i], "type", bw);
    if (type == "image" || type == "document")
      throw bad_request(fmt::format("Unsupported block '{}' in '{}': this server takes text only.", type, bw),
                        bw + ".type", "unsupported_content");
    if (type != "text")
      throw bad_request(fmt::format("Invalid '{}.type': '{}' is not supported here; expected text.", bw,
                                    printable(type)),
                        bw + ".type", "invalid_value");
    if (!out.empty()) out += '\n';
    out += string_at(v[i], "text", bw);
  }
  return out;
}

// One message -> chat messages (a user turn's tool results become tool
// messages before its text). `calls`: tool_use ids issued so far -> names.
void parse_message(const ojson& m, size_t i, std::vector<ChatMessage>& out,
                   std::map<std::string, std::string>& calls) {
  const std::string where = fmt::format("messages[{}]", i);
  if (!m.is_object()) throw type_error(where, "an object", m);
  const std::string role = string_at(m, "role", where);
  if (role != "user" && role != "assistant" && role != "system")
    throw bad_request(fmt::format("Invalid '{}.role': '{}' is not one of user, assistant.", where, printable(role)),
                      where + ".role", "invalid_value");
  const ojson* content = field(m, "content");
  if (!content) throw missing(where + ".content");
  if (content->is_string() || role == "system") {
    out.push_back({role, text_of(*content, where + ".content"), nullptr, "", ""});
    return;
  }
  if (!content->is_array()) throw type_error(where + ".content", "a string or an array of blocks", *content);
  ChatMessage msg{role, "", nullptr, "", ""};
  std::vector<ChatMessage> results;
  for (size_t j = 0; j < content->size(); ++j) {
    const ojson& b = (*content)[j];
    const std::string bw = fmt::format("{}.content[{}]", where, j);
    if (!b.is_object()) throw type_error(bw, "an object", b);
    const std::string type = string_at(b, "type", bw);
    if (type == "text") {
      if (!msg.content.empty()) msg.content += '\n';
      msg.content += string_at(b, "text", bw);
    } else if (type == "tool_use") {
      if (role != "assistant")
        throw bad_request(fmt::format("Invalid '{}': tool_use blocks belong to assistant messages.", bw), bw + ".type",
                          "invalid_value");
      const std::string id = string_at(b, "id", bw);
      const std::string name = string_at(b, "name", bw);
      const ojson* input = field(b, "input");
      if (input && !input->is_object()) throw type_error(bw + ".input", "an object", *input);
      calls[id] = name;
      if (!msg.tool_calls.is_array()) msg.tool_calls = ojson::array();
      msg.tool_calls.push_back({{"id", id}, {"type", "function"},
                                {"function", {{"name", name}, {"arguments", input ? input->dump() : "{}"}}}});
    } else if (type == "tool_result") {
      if (role != "user")
        throw bad_request(fmt::format("Invalid '{}': tool_result blocks belong to user messages.", bw), bw + ".type",
                          "invalid_value");
      const std::string id = string_at(b, "tool_use_id", bw);
      const auto issued = calls.find(id);
      if (issued == calls.end())
        throw bad_request(fmt::format("Invalid '{}.tool_use_id': no earlier tool_use block has id '{}'.", bw,
                                      printable(id)),
                          bw + ".tool_use_id", "invalid_value");
      const ojson* c = field(b, "content");
      std::string text = c ? text_of(*c, bw + ".content") : std::string();
      if (const ojson* err = field(b, "is_error"); err && err->is_boolean() && err->get<bool>())
        text = "Error: " + text;
      results.push_back({"tool", std::move(text), nullptr, id, issued->second});
    } else if (type == "thinking" || type == "redacted_thinking") {
      continue;  // never produced by Nexus; a client replaying another model's turn
    } else if (type == "image" || type == "document") {
      throw bad_request(fmt::format("Unsupported block '{}' in '{}': this server takes text only.", type, bw),
                        bw + ".type", "unsupported_content");
    } else {
      throw bad_request(fmt::format("Invalid '{}.type': '{}' is not one of text, tool_use, tool_result.", bw,
                                    printable(type)),
                        bw + ".type", "invalid_value");
    }
  }
  out.insert(out.end(), results.begin(), results.end());
  if (!msg.content.empty() || msg.tool_calls.is_array() || results.empty()) out.push_back(std::move(msg));
}

bool server_tool(const std::string& type) {
  return type != "custom";  // web_search_*, bash_*, text_editor_*, code_execution_*, computer_*, ...
}

void parse_tools(const ojson& doc, ConversationRequest& r, bool strict_tools) {
  ToolRequest& tr = r.tool_use;
  if (const ojson* tools = field(doc, "tools")) {
    if (!tools->is_array()) throw type_error("tools", "an array", *tools);
    for (size_t i = 0; i < tools->size(); ++i) {
      const ojson& t = (*tools)[i];
      const std::string where = fmt::format("tools[{}]", i);
      if (!t.is_object()) throw type_error(where, "an object", t);
      if (const ojson* type = field(t, "type")) {
        if (!type->is_string()) throw type_error(where + ".type", "a string", *type);
        if (server_tool(type->get<std::string>())) {
          if (strict_tools)
            throw bad_request(fmt::format("Unsupported tool '{}' in '{}': this server cannot run server tools "
                                          "(started with --strict-tools).", printable(type->get<std::string>()), where),
                              where + ".type", "unsupported_tool");
          continue;
        }
      }
      if (const ojson* d = field(t, "defer_loading"); d && d->is_boolean() && d->get<bool>()) continue;
      const ojson* schema = field(t, "input_schema");
      if (!schema) throw missing(where + ".input_schema");
      add_tool(tr, checked_tool(field(t, "name"), field(t, "description"), schema, where, "input_schema",
                                /*compile=*/false),
               where);
    }
    if (!tr.tools.empty()) tr.choice = ToolChoice::Auto;
  }
  if (const ojson* c = field(doc, "tool_choice")) {
    if (!c->is_object()) throw type_error("tool_choice", "an object", *c);
    const std::string type = string_at(*c, "type", "tool_choice");
    if (type == "auto") tr.choice = tr.tools.empty() ? ToolChoice::None : ToolChoice::Auto;
    else if (type == "any") tr.choice = ToolChoice::Required;
    else if (type == "none") tr.choice = ToolChoice::None;
    else if (type == "tool") {
      tr.choice = ToolChoice::Named;
      tr.named = string_at(*c, "name", "tool_choice");
    } else {
      throw bad_request(fmt::format("Invalid 'tool_choice.type': '{}' is not one of auto, any, tool, none.",
                                    printable(type)),
                        "tool_choice.type", "invalid_value");
    }
    if (const ojson* d = field(*c, "disable_parallel_tool_use")) {
      if (!d->is_boolean()) throw type_error("tool_choice.disable_parallel_tool_use", "a boolean", *d);
      tr.parallel = !d->get<bool>();
    }
  }
  check_choice(tr, false, "tool_choice");
  // The template's list (and, for a template without tool support, the
  // system message explaining them: tool_calls/request.h) reads template_tools.
  tr.template_tools = tr.active() ? template_tools(tr.tools) : ojson();
  r.tools = tr.template_tools;
}

bool accepted_field(const std::string& k) {
  static const std::set<std::string> kKnown = {
      "model", "max_tokens", "system", "messages", "tools", "tool_choice", "stop_sequences", "temperature", "top_p",
      "top_k", "stream", "metadata", "thinking", "service_tier", "context_management", "output_config", "safeguards",
      "container", "mcp_servers", "priority", "seed", "min_p", "repeat_penalty", "frequency_penalty",
      "presence_penalty", "ignore_eos"};
  return kKnown.count(k) > 0;
}

}  // namespace

ConversationRequest parse_messages_request(std::string_view body, const MessagesParseOptions& opts) {
  const json doc = parse_json_body(body);
  const ojson odoc = parse_json_bounded<ojson>(body);  // parsed once already: cannot fail (keeps schema order)
  for (const auto& kv : doc.items())
    if (!accepted_field(kv.key()))
      throw bad_request(fmt::format("Unrecognized parameter: '{}'.", printable(kv.key())), kv.key(),
                        "unknown_parameter");
  if (const json* mcp = field(doc, "mcp_servers"); mcp && !(mcp->is_array() && mcp->empty()))
    throw bad_request("Unsupported parameter: 'mcp_servers': this server connects to no MCP server.", "mcp_servers",
                      "unsupported_parameter");

  ConversationRequest r;
  r.endpoint = Endpoint::Messages;
  if (auto m = get_string(doc, "model")) r.model = *m;
  else throw missing("model");
  if (!opts.count_tokens) {
    r.max_tokens = get_integer(doc, "max_tokens");
    if (!r.max_tokens) throw missing("max_tokens");
    r.stream = get_bool(doc, "stream").value_or(false);
  }
  (void)get_number(doc, "temperature", 0, 1);  // Anthropic's range, checked first; parse_sampling reads it
  parse_sampling(doc, r);
  r.priority = parse_priority(doc, opts.max_priority);
  if (const json* s = field(doc, "stop_sequences")) {
    if (!s->is_array()) throw type_error("stop_sequences", "an array of strings", *s);
    if (s->size() > 4)
      throw bad_request("Invalid 'stop_sequences': at most 4 are allowed.", "stop_sequences", "invalid_value");
    for (const json& e : *s) {
      if (!e.is_string()) throw type_error("stop_sequences", "an array of strings", e);
      if (!e.get<std::string>().empty()) r.stop.push_back(e.get<std::string>());
    }
  }
  for (const char* name : {"metadata", "thinking"})
    if (const json* v = field(doc, name); v && !v->is_object()) throw type_error(name, "an object", *v);

  if (const ojson* system = field(odoc, "system")) r.messages.push_back({"system", text_of(*system, "system"), nullptr, "", ""});
  const ojson* messages = field(odoc, "messages");
  if (!messages) throw missing("messages");
  if (!messages->is_array()) throw type_error("messages", "an array", *messages);
  if (messages->empty()) throw bad_request("Invalid 'messages': at least one message is required.", "messages", "invalid_value");
  std::map<std::string, std::string> calls;
  for (size_t i = 0; i < messages->size(); ++i) parse_message((*messages)[i], i, r.messages, calls);
  parse_tools(odoc, r, opts.strict_tools);
  return r;
}

}  // namespace nexus::server
