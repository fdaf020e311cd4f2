#include "loadgen/openai_stream.h"

#include <nlohmann/json.hpp>

namespace nexus::loadgen {

using nlohmann::json;

std::optional<int64_t> json_count(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int64_t>();
}

ChunkInfo interpret_chunk(std::string_view data) {
  ChunkInfo info;
  if (data == "[DONE]") {
    info.done = true;
    return info;
  }
  const json j = json::parse(data, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    info.malformed = true;
    return info;
  }
  if (auto e = j.find("error"); e != j.end() && !e->is_null()) {
    std::string msg = e->dump();
    if (e->is_object() && e->contains("message") && (*e)["message"].is_string()) msg = (*e)["message"];
    if (e->is_string()) msg = e->get<std::string>();
    info.error = msg;
    return info;
  }
  if (auto c = j.find("choices"); c != j.end() && c->is_array() && !c->empty() && (*c)[0].is_object()) {
    const json& choice = (*c)[0];
    if (auto t = choice.find("text"); t != choice.end() && t->is_string()) info.text = t->get<std::string>();
    if (auto d = choice.find("delta"); d != choice.end() && d->is_object()) {
      if (auto t = d->find("content"); t != d->end() && t->is_string()) info.text += t->get<std::string>();
    }
  }
  if (auto u = j.find("usage"); u != j.end() && u->is_object()) {
    info.prompt_tokens = json_count(*u, "prompt_tokens");
    info.completion_tokens = json_count(*u, "completion_tokens");
    if (auto d = u->find("prompt_tokens_details"); d != u->end() && d->is_object()) {
      info.cached_tokens = json_count(*d, "cached_tokens");
    }
  }
  return info;
}

}  // namespace nexus::loadgen
