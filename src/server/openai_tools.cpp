#include "server/openai_tools.h"

#include <algorithm>

#include <fmt/format.h>

#include "grammar/json_schema.h"
#include "server/api_error.h"
#include "server/core/request_fields.h"
#include "util/error.h"
#include "util/json_depth.h"

namespace nexus::server {

namespace {

using ojson = nlohmann::ordered_json;


void refuse_unknown_keys(const ojson& obj, const std::string& where, std::initializer_list<const char*> known) {
  for (const auto& item : obj.items()) {
    const std::string& k = item.key();
    if (std::none_of(known.begin(), known.end(), [&](const char* n) { return k == n; }))
      throw bad_request(fmt::format("Unrecognized parameter: '{}.{}'.", where, printable(k)), where + "." + k,
                        "unknown_parameter");
  }
}

bool valid_name(const std::string& n) {
  return !n.empty() && n.size() <= 64 && std::all_of(n.begin(), n.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

ToolDefinition parse_tool(const ojson& t, size_t i) {
  const std::string where = fmt::format("tools[{}]", i);
  if (!t.is_object()) throw type_error(where, "an object", t);
  refuse_unknown_keys(t, where, {"type", "function"});
  const ojson* type = field(t, "type");
  if (!type || !type->is_string() || type->get<std::string>() != "function")
    throw bad_request(fmt::format("Invalid '{}.type': only \"function\" tools are supported.", where), where + ".type",
                      "invalid_value");
  const ojson* f = field(t, "function");
  if (!f) throw bad_request(fmt::format("Missing required parameter: '{}.function'.", where), where + ".function",
                            "missing_required_parameter");
  if (!f->is_object()) throw type_error(where + ".function", "an object", *f);
  const std::string fw = where + ".function";
  refuse_unknown_keys(*f, fw, {"name", "description", "parameters", "strict"});
  if (const ojson* strict = field(*f, "strict"); strict && !strict->is_boolean())
    throw type_error(fw + ".strict", "a boolean", *strict);
  return checked_tool(field(*f, "name"), field(*f, "description"), field(*f, "parameters"), fw, "parameters");
}

void parse_choice(const ojson& c, ToolRequest& r, bool has_grammar) {
  if (c.is_string()) {
    const std::string s = c.get<std::string>();
    if (s == "auto") r.choice = ToolChoice::Auto;
    else if (s == "none") r.choice = ToolChoice::None;
    else if (s == "required") r.choice = ToolChoice::Required;
    else
      throw bad_request(fmt::format("Invalid 'tool_choice': '{}' is not one of none, auto, required, or an object "
                                    "naming a function.", printable(s)),
                        "tool_choice", "invalid_value");
  } else if (c.is_object()) {
    const ojson* type = field(c, "type");
    const ojson* f = field(c, "function");
    const ojson* name = f && f->is_object() ? field(*f, "name") : nullptr;
    if (!type || !type->is_string() || type->get<std::string>() != "function" || !name || !name->is_string())
      throw bad_request("Invalid 'tool_choice': expected {\"type\": \"function\", \"function\": {\"name\": ...}}.",
                        "tool_choice", "invalid_value");
    r.choice = ToolChoice::Named;
    r.named = name->get<std::string>();
  } else {
    throw type_error("tool_choice", "a string or an object", c);
  }
  check_choice(r, has_grammar, "tool_choice");
}

}  // namespace

ToolDefinition checked_tool(const ojson* name, const ojson* description, const ojson* parameters,
                            const std::string& where, const char* parameters_key, bool compile) {
  ToolDefinition d;
  if (!name) throw bad_request(fmt::format("Missing required parameter: '{}.name'.", where), where + ".name",
                               "missing_required_parameter");
  if (!name->is_string()) throw type_error(where + ".name", "a string", *name);
  d.name = name->get<std::string>();
  if (!valid_name(d.name))
    throw bad_request(fmt::format("Invalid '{}.name': '{}' does not match ^[a-zA-Z0-9_-]{{1,64}}$.", where,
                                  printable(d.name)),
                      where + ".name", "invalid_value");
  if (description) {
    if (!description->is_string()) throw type_error(where + ".description", "a string", *description);
    d.description = description->get<std::string>();
  }
  const std::string pw = where + "." + parameters_key;
  if (parameters && !parameters->is_object()) throw type_error(pw, "an object (a JSON schema)", *parameters);
  d.parameters = parameters ? *parameters : ojson{{"type", "object"}, {"properties", ojson::object()}};
  if (!compile) return d;
  try {
    (void)grammar::compile_json_schema(d.parameters);  // refused now, whatever tool_choice says
  } catch (const Error& e) {
    throw bad_request(fmt::format("Invalid '{}': {}", pw, printable(e.what())), pw, "invalid_value");
  }
  return d;
}

void add_tool(ToolRequest& r, ToolDefinition d, const std::string& where) {
  for (const ToolDefinition& other : r.tools)
    if (other.name == d.name)
      throw bad_request(fmt::format("Invalid '{}.name': '{}' names two tools.", where, d.name), where + ".name",
                        "invalid_value");
  r.tools.push_back(std::move(d));
}

void check_choice(const ToolRequest& r, bool has_grammar, const std::string& param) {
  if ((r.choice == ToolChoice::Required || r.choice == ToolChoice::Named) && r.tools.empty())
    throw bad_request(fmt::format("Invalid '{}': it requires 'tools' to call.", param), param, "invalid_value");
  if (r.choice == ToolChoice::Named &&
      std::none_of(r.tools.begin(), r.tools.end(), [&](const ToolDefinition& d) { return d.name == r.named; }))
    throw bad_request(fmt::format("Invalid '{}': no tool is named '{}'.", param, printable(r.named)), param,
                      "invalid_value");
  if (r.forced() && has_grammar)
    throw bad_request(fmt::format("Invalid '{}': a required or named tool choice cannot be combined with a "
                                  "response format or grammar.", param), param, "invalid_value");
}

ojson template_tools(const std::vector<ToolDefinition>& tools) {
  ojson out = ojson::array();
  for (const ToolDefinition& d : tools) {
    ojson f = {{"name", d.name}};
    if (!d.description.empty()) f["description"] = d.description;
    f["parameters"] = d.parameters;
    out.push_back({{"type", "function"}, {"function", std::move(f)}});
  }
  return out;
}

ToolRequest parse_tools(const nlohmann::json& body, std::string_view raw, bool has_grammar) {
  ToolRequest r;
  const auto present = [&](const char* k) { return body.contains(k) && !body.at(k).is_null(); };
  if (!present("tools") && !present("tool_choice") && !present("parallel_tool_calls")) return r;
  const ojson doc = parse_json_bounded<ojson>(raw);  // parsed once already (openai_request.cpp): cannot fail
  if (const ojson* tools = field(doc, "tools")) {
    if (!tools->is_array()) throw type_error("tools", "an array", *tools);
    for (size_t i = 0; i < tools->size(); ++i)
      add_tool(r, parse_tool((*tools)[i], i), fmt::format("tools[{}].function", i));
    if (!r.tools.empty()) {
      r.template_tools = *tools;
      r.choice = ToolChoice::Auto;
    }
  }
  if (const ojson* c = field(doc, "tool_choice")) parse_choice(*c, r, has_grammar);
  if (const ojson* p = field(doc, "parallel_tool_calls")) {
    if (!p->is_boolean()) throw type_error("parallel_tool_calls", "a boolean", *p);
    r.parallel = p->get<bool>();
  }
  if (r.choice == ToolChoice::None) r.template_tools = nullptr;  // none: the model is not told about them
  return r;
}

}  // namespace nexus::server
