#include "server/tokenize_endpoints.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/openai_request.h"

namespace nexus::server {

using nlohmann::json;

namespace {

bool flag(const json& doc, const char* name, bool dflt) {
  auto it = doc.find(name);
  if (it == doc.end() || it->is_null()) return dflt;
  if (!it->is_boolean())
    throw bad_request(fmt::format("Invalid type for '{}': expected a boolean.", name), name, "invalid_type");
  return it->get<bool>();
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace

HttpReply tokenize_reply(const Backend& backend, std::string_view body) {
  try {
    const json doc = parse_json_body(body);
    auto c = doc.find("content");
    if (c == doc.end() || c->is_null())
      throw bad_request("Missing required parameter: 'content'.", "content", "missing_required_parameter");
    if (!c->is_string()) throw bad_request("Invalid type for 'content': expected a string.", "content", "invalid_type");
    const bool add_special = flag(doc, "add_special", false);
    const bool parse_special = flag(doc, "parse_special", true);
    const bool with_pieces = flag(doc, "with_pieces", false);
    const std::string& text = c->get_ref<const std::string&>();
    const std::vector<int32_t> ids =
        add_special ? backend.tokenize(text, parse_special) : backend.tokenize_continuation(text, parse_special);
    json tokens = json::array();
    for (int32_t id : ids) {
      if (!with_pieces) {
        tokens.push_back(id);
        continue;
      }
      const std::string piece = backend.token_piece(id);
      json p;
      if (is_valid_utf8(piece)) {
        p = piece;
      } else {
        p = json::array();
        for (unsigned char b : piece) p.push_back(static_cast<int>(b));
      }
      tokens.push_back({{"id", id}, {"piece", std::move(p)}});
    }
    return HttpReply{200, dump(json{{"tokens", std::move(tokens)}}), {}};
  } catch (const ApiError& e) {
    return error_reply(e);
  }
}

HttpReply detokenize_reply(const Backend& backend, std::string_view body) {
  try {
    const json doc = parse_json_body(body);
    auto t = doc.find("tokens");
    if (t == doc.end() || t->is_null())
      throw bad_request("Missing required parameter: 'tokens'.", "tokens", "missing_required_parameter");
    if (!t->is_array())
      throw bad_request("Invalid type for 'tokens': expected an array of token ids.", "tokens", "invalid_type");
    std::vector<int32_t> ids;
    for (const json& v : *t) {
      if (!v.is_number_integer())
        throw bad_request("Invalid type for 'tokens': expected an array of token ids.", "tokens", "invalid_type");
      const bool in_range = v.is_number_unsigned() ? v.get<uint64_t>() < static_cast<uint64_t>(backend.n_vocab())
                                                   : v.get<int64_t>() >= 0 && v.get<int64_t>() < backend.n_vocab();
      if (!in_range)
        throw bad_request(fmt::format("Invalid 'tokens': token id {} is outside the vocabulary [0, {}).", v.dump(),
                                      backend.n_vocab()),
                          "tokens", "invalid_value");
      ids.push_back(v.get<int32_t>());
    }
    return HttpReply{200, dump(json{{"content", backend.detokenize(ids)}}), {}};
  } catch (const ApiError& e) {
    return error_reply(e);
  }
}

}  // namespace nexus::server
