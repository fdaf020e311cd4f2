#include "server/core/request_fields.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace nexus::server {

using nlohmann::json;

namespace {

template <typename Json>
const char* kind(const Json& v) {
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number()) return "a number";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return "null";
}

ApiError wrong_type(const std::string& name, const char* expected, const char* got) {
  return bad_request(fmt::format("Invalid type for '{}': expected {}, but got {} instead.", name, expected, got), name,
                     "invalid_type");
}

}  // namespace

const char* type_name(const json& v) { return kind(v); }
const char* type_name(const nlohmann::ordered_json& v) { return kind(v); }

ApiError type_error(const std::string& name, const char* expected, const json& got) {
  return wrong_type(name, expected, kind(got));
}

ApiError type_error(const std::string& name, const char* expected, const nlohmann::ordered_json& got) {
  return wrong_type(name, expected, kind(got));
}

const json* field(const json& obj, const char* name) {
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

const nlohmann::ordered_json* field(const nlohmann::ordered_json& obj, const char* name) {
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<double> get_number(const json& obj, const char* name, double lo, double hi) {
  const json* v = field(obj, name);
  if (!v) return std::nullopt;
  if (!v->is_number()) throw type_error(name, "a number", *v);
  const double d = v->get<double>();
  if (!(d >= lo && d <= hi)) {
    throw bad_request(fmt::format("Invalid '{}': expected a value in [{}, {}], but got {} instead.",
                                  name, lo, hi, d),
                      name, "invalid_value");
  }
  return d;
}

std::optional<int64_t> get_integer(const json& obj, const char* name) {
  const json* v = field(obj, name);
  if (!v) return std::nullopt;
  const auto out_of_range = [&] {
    return bad_request(fmt::format("Invalid '{}': {} is outside the range of a 64-bit integer.", name, v->dump()),
                       name, "invalid_value");
  };
  if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) throw out_of_range();
    return static_cast<int64_t>(u);
  }
  if (v->is_number_integer()) return v->get<int64_t>();
  if (v->is_number_float()) {
    const double d = v->get<double>();
    if (std::isfinite(d) && d == std::floor(d)) {
      // [-2^63, 2^63): the doubles that convert exactly.
      if (d >= 9223372036854775808.0 || d < -9223372036854775808.0) throw out_of_range();
      return static_cast<int64_t>(d);
    }
  }
  throw type_error(name, "an integer", *v);
}

std::optional<bool> get_bool(const json& obj, const char* name) {
  const json* v = field(obj, name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) throw type_error(name, "a boolean", *v);
  return v->get<bool>();
}

std::optional<std::string> get_string(const json& obj, const char* name, const std::string& param) {
  const json* v = field(obj, name);
  if (!v) return std::nullopt;
  if (!v->is_string()) throw type_error(param.empty() ? std::string(name) : param, "a string", *v);
  return v->get<std::string>();
}

}  // namespace nexus::server
