#include "server/embeddings.h"

#include <cmath>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/openai_request.h"

namespace nexus::server {

using nlohmann::json;

namespace {

constexpr size_t kMaxInputs = 2048;  // OpenAI's limit per request

const json* field(const json& obj, const char* name) {
  auto it = obj.find(name);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

ApiError input_error(const std::string& message, const char* code = "invalid_value") {
  return bad_request("Invalid 'input': " + message, "input", code);
}

std::vector<int32_t> token_input(const json& arr, const Backend& backend) {
  if (arr.empty()) throw input_error("a token array is empty.", "empty_array");
  std::vector<int32_t> ids;
  for (const json& t : arr) {
    if (!t.is_number_integer()) throw input_error("expected a string, an array of strings, or token id arrays.", "invalid_type");
    const bool ok = t.is_number_unsigned() ? t.get<uint64_t>() < static_cast<uint64_t>(backend.n_vocab())
                                           : t.get<int64_t>() >= 0 && t.get<int64_t>() < backend.n_vocab();
    if (!ok) throw input_error(fmt::format("token id {} is outside the vocabulary [0, {}).", t.dump(), backend.n_vocab()));
    ids.push_back(t.get<int32_t>());
  }
  return ids;
}

std::vector<int32_t> text_input(const json& s, const Backend& backend) {
  const std::string& text = s.get_ref<const std::string&>();
  if (text.empty()) throw input_error("an input string is empty.", "empty_string");
  std::vector<int32_t> ids = backend.tokenize(text, true);
  if (ids.empty()) throw input_error("an input string encodes to no tokens.");
  return ids;
}

std::vector<std::vector<int32_t>> parse_inputs(const json& doc, const Backend& backend) {
  const json* in = field(doc, "input");
  if (!in) throw bad_request("Missing required parameter: 'input'.", "input", "missing_required_parameter");
  std::vector<std::vector<int32_t>> out;
  if (in->is_string()) {
    out.push_back(text_input(*in, backend));
  } else if (in->is_array()) {
    if (in->empty()) throw input_error("the array is empty.", "empty_array");
    if (in->size() > kMaxInputs) throw input_error(fmt::format("at most {} inputs per request.", kMaxInputs));
    if ((*in)[0].is_number()) {
      out.push_back(token_input(*in, backend));
    } else {
      for (const json& e : *in) {
        if (e.is_string()) out.push_back(text_input(e, backend));
        else if (e.is_array()) out.push_back(token_input(e, backend));
        else throw input_error("expected a string, an array of strings, or token id arrays.", "invalid_type");
      }
    }
  } else {
    throw bad_request("Invalid type for 'input': expected a string or an array.", "input", "invalid_type");
  }
  for (const auto& ids : out)
    if (static_cast<int64_t>(ids.size()) >= backend.n_ctx())
      throw input_error(fmt::format("an input of {} tokens does not fit this model's context of {} tokens.",
                                    ids.size(), backend.n_ctx()),
                        "context_length_exceeded");
  return out;
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace

Pooling pooling_of(int32_t pooling_type) {
  switch (pooling_type) {
    case -1: case 0: case 1: return Pooling::Mean;
    case 2: return Pooling::Cls;
    case 3: return Pooling::Last;
    default: break;
  }
  throw ApiError(500, fmt::format("The model's pooling_type {} ({}) is not supported for embeddings.", pooling_type,
                                  pooling_type == 4 ? "rank" : "unknown"),
                 "", "unsupported_pooling_type", "server_error");
}

std::vector<float> pool_hidden(std::span<const float> hidden, int32_t n_embd, Pooling pooling) {
  const auto E = static_cast<size_t>(n_embd);
  const size_t n = hidden.size() / E;
  std::vector<float> out(E, 0.0f);
  if (n == 0) return out;
  if (pooling == Pooling::Cls) return {hidden.begin(), hidden.begin() + static_cast<ptrdiff_t>(E)};
  if (pooling == Pooling::Last) return {hidden.end() - static_cast<ptrdiff_t>(E), hidden.end()};
  std::vector<double> sum(E, 0.0);
  for (size_t t = 0; t < n; ++t)
    for (size_t i = 0; i < E; ++i) sum[i] += hidden[t * E + i];
  for (size_t i = 0; i < E; ++i) out[i] = static_cast<float>(sum[i] / static_cast<double>(n));
  return out;
}

void l2_normalize(std::vector<float>& v) {
  double ss = 0;
  for (float x : v) ss += static_cast<double>(x) * x;
  if (!(ss > 0)) return;
  const double inv = 1.0 / std::sqrt(ss);
  for (float& x : v) x = static_cast<float>(x * inv);
}

std::string base64_encode(std::string_view bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t v = static_cast<uint32_t>(static_cast<unsigned char>(bytes[i])) << 16 |
                       static_cast<uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8 |
                       static_cast<unsigned char>(bytes[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out += kAlphabet[(v >> s) & 63];
  }
  const size_t rest = bytes.size() - i;
  if (rest > 0) {
    uint32_t v = static_cast<uint32_t>(static_cast<unsigned char>(bytes[i])) << 16;
    if (rest == 2) v |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += rest == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

HttpReply embeddings_reply(const Backend& backend, std::string_view body) {
  try {
    const json doc = parse_json_body(body);
    if (const json* m = field(doc, "model")) {
      if (!m->is_string()) throw bad_request("Invalid type for 'model': expected a string.", "model", "invalid_type");
      if (m->get<std::string>() != backend.model_id())
        throw bad_request(fmt::format("The model '{}' does not exist; this server serves '{}'.",
                                      printable(m->get<std::string>()), backend.model_id()),
                          "model", "model_not_found");
    }
    bool base64 = false;
    if (const json* f = field(doc, "encoding_format")) {
      if (!f->is_string() || (f->get<std::string>() != "float" && f->get<std::string>() != "base64"))
        throw bad_request("Invalid 'encoding_format': expected \"float\" or \"base64\".", "encoding_format",
                          "invalid_value");
      base64 = f->get<std::string>() == "base64";
    }
    if (backend.n_embd() <= 0)
      throw ApiError(501, "This server's backend computes no embeddings.", "", "embeddings_unavailable", "server_error");
    if (const json* d = field(doc, "dimensions"); d && !(d->is_number_integer() && d->get<int64_t>() == backend.n_embd()))
      throw bad_request(fmt::format("Invalid 'dimensions': this model's embeddings have {} dimensions (shortened "
                                    "embeddings are not supported).",
                                    backend.n_embd()),
                        "dimensions", "unsupported_value");
    if (const json* u = field(doc, "user"); u && !u->is_string())
      throw bad_request("Invalid type for 'user': expected a string.", "user", "invalid_type");
    const std::vector<std::vector<int32_t>> inputs = parse_inputs(doc, backend);
    json data = json::array();
    int64_t n_tokens = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      std::vector<float> v = backend.embedding(inputs[i]);
      l2_normalize(v);
      n_tokens += static_cast<int64_t>(inputs[i].size());
      json e = {{"object", "embedding"}, {"index", i}};
      if (base64) {
        std::string raw(v.size() * sizeof(float), '\0');
        std::memcpy(raw.data(), v.data(), raw.size());  // little-endian hosts (x86-64, aarch64)
        e["embedding"] = base64_encode(raw);
      } else {
        e["embedding"] = v;
      }
      data.push_back(std::move(e));
    }
    return HttpReply{200,
                     dump(json{{"object", "list"},
                               {"data", std::move(data)},
                               {"model", backend.model_id()},
                               {"usage", {{"prompt_tokens", n_tokens}, {"total_tokens", n_tokens}}}}),
                     {}};
  } catch (const ApiError& e) {
    return error_reply(e);
  } catch (const std::exception& e) {
    return error_reply(ApiError(500, std::string("internal error: ") + e.what(), "", "", "server_error"));
  }
}

}  // namespace nexus::server
