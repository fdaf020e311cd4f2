#include "server/chat_template.h"

#include "server/api_error.h"
#include "template/jinja.h"
#include "util/json_depth.h"

namespace nexus::server {

namespace {

// The fallback as a template: "Role: content\n" per message, then "Assistant:".
constexpr std::string_view kPlainTemplate =
    "{% for m in messages %}{{ m.role | capitalize }}: {{ m.content }}\n{% endfor %}"
    "{% if add_generation_prompt %}Assistant:{% endif %}";

nlohmann::ordered_json message_json(const ChatMessage& m) {
  nlohmann::ordered_json j;
  j["role"] = m.role;
  j["content"] = m.content;
  if (!m.tool_calls.is_null()) {
    nlohmann::ordered_json calls = m.tool_calls;
    for (auto& c : calls) {
      if (!c.is_object() || !c.contains("function") || !c["function"].is_object()) continue;
      auto& f = c["function"];
      if (f.contains("arguments") && f["arguments"].is_string()) {
        // Bounded: the arguments are client text (a deep one stays a string).
        auto parsed = parse_json_bounded_or_discarded<nlohmann::ordered_json>(f["arguments"].get<std::string>());
        if (!parsed.is_discarded() && parsed.is_object()) f["arguments"] = std::move(parsed);
      }
    }
    j["tool_calls"] = std::move(calls);
  }
  if (!m.tool_call_id.empty()) j["tool_call_id"] = m.tool_call_id;
  if (!m.name.empty()) j["name"] = m.name;
  return j;
}

}  // namespace

ChatTemplate::ChatTemplate() : tmpl_(std::make_shared<const tmpl::Template>(kPlainTemplate)) {}

ChatTemplate::ChatTemplate(std::string_view source, std::string origin, std::string bos_token, std::string eos_token)
    : tmpl_(std::make_shared<const tmpl::Template>(source)),
      origin_(std::move(origin)),
      bos_(std::move(bos_token)),
      eos_(std::move(eos_token)),
      source_(source) {}

ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(const ChatTemplate&) = default;
ChatTemplate& ChatTemplate::operator=(const ChatTemplate&) = default;

std::string ChatTemplate::render(std::span<const ChatMessage> messages, const nlohmann::ordered_json& tools,
                                 bool add_generation_prompt) const {
  nlohmann::ordered_json ctx;
  ctx["messages"] = nlohmann::ordered_json::array();
  for (const ChatMessage& m : messages) ctx["messages"].push_back(message_json(m));
  ctx["add_generation_prompt"] = add_generation_prompt;
  ctx["bos_token"] = bos_;
  ctx["eos_token"] = eos_;
  if (!tools.is_null()) ctx["tools"] = tools;
  try {
    return tmpl_->render(ctx);
  } catch (const tmpl::TemplateError& e) {
    using K = tmpl::TemplateError::Kind;
    const std::string what = e.what();
    if (e.kind() == K::Raised) {
      throw ApiError(400, "The model's chat template rejected the conversation: " + what, "messages",
                     "chat_template_rejected");
    }
    if (e.kind() == K::Limit && what.find("value nested deeper") != std::string::npos) {
      // Client values (tool arguments, tools' schemas) past the template's
      // value depth: only with a --max-json-depth above it.
      throw ApiError(400, "A value in the conversation is nested too deeply for the chat template: " + what,
                     "messages", "nesting_too_deep");
    }
    if (e.kind() == K::Limit && what.find("output exceeds") != std::string::npos) {
      throw ApiError(400, "The conversation is too large for the chat template: " + what, "messages",
                     "chat_template_too_large");
    }
    throw ApiError(500, "The model's chat template failed: " + what, "", "chat_template_error", "server_error");
  }
}

bool ChatTemplate::starts_with_bos(std::string_view text) const {
  return !bos_.empty() && text.substr(0, bos_.size()) == bos_;
}

}  // namespace nexus::server
