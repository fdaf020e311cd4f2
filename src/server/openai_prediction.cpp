#include "server/openai_prediction.h"

#include <nlohmann/json.hpp>

#include "server/api_error.h"

namespace nexus::server {

std::optional<std::string> parse_prediction(const nlohmann::json& doc) {
  auto it = doc.find("prediction");
  if (it == doc.end() || it->is_null()) return std::nullopt;
  auto bad = [](const std::string& what) { return bad_request("Invalid 'prediction': " + what, "prediction", "invalid_value"); };
  const nlohmann::json& p = *it;
  if (!p.is_object()) throw bad("expected an object {\"type\": \"content\", \"content\": ...}.");
  for (const auto& [key, value] : p.items())
    if (key != "type" && key != "content") throw bad("unknown field '" + key + "'.");
  auto type = p.find("type");
  if (type == p.end() || !type->is_string() || type->get_ref<const std::string&>() != "content")
    throw bad("'type' must be \"content\".");
  auto content = p.find("content");
  if (content == p.end()) throw bad("'content' is missing.");
  if (content->is_string()) return content->get<std::string>();
  if (!content->is_array()) throw bad("'content' must be a string or an array of text parts.");
  std::string text;
  for (const nlohmann::json& part : *content) {
    auto t = part.is_object() ? part.find("type") : part.end();
    auto x = part.is_object() ? part.find("text") : part.end();
    if (t == part.end() || !t->is_string() || t->get_ref<const std::string&>() != "text" || x == part.end() ||
        !x->is_string())
      throw bad("each part of 'content' must be {\"type\": \"text\", \"text\": string}.");
    text += x->get_ref<const std::string&>();
  }
  return text;
}

}  // namespace nexus::server
