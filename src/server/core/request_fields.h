// Readers of a request body's fields, shared by every protocol's parser:
// each problem is an ApiError 400 (invalid_request_error) naming the field,
// `param` set to it, with OpenAI's wording ("Invalid type for 'x': expected
// a number, but got a string instead."); the Anthropic front-end keeps the
// message and renders its own shape (core/protocol.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "server/api_error.h"

namespace nexus::server {

// "a string", "an object", ... (for messages).
const char* type_name(const nlohmann::json& v);

const char* type_name(const nlohmann::ordered_json& v);

// 400 invalid_type: `name` should be `expected` ("a string") but is `got`.
ApiError type_error(const std::string& name, const char* expected, const nlohmann::json& got);
ApiError type_error(const std::string& name, const char* expected, const nlohmann::ordered_json& got);

// The field, or nullptr when absent or null.
const nlohmann::json* field(const nlohmann::json& obj, const char* name);
const nlohmann::ordered_json* field(const nlohmann::ordered_json& obj, const char* name);

// A number in [lo, hi] (400 invalid_value outside; NaN never passes).
std::optional<double> get_number(const nlohmann::json& obj, const char* name, double lo, double hi);

// An integer field. Values a 64-bit integer cannot hold (2^64, 1e30) are a
// 400 naming the field, never clamped; an integral float (3.0) is accepted.
std::optional<int64_t> get_integer(const nlohmann::json& obj, const char* name);

std::optional<bool> get_bool(const nlohmann::json& obj, const char* name);

// A string field; `param` names it in errors ("" = `name`).
std::optional<std::string> get_string(const nlohmann::json& obj, const char* name, const std::string& param = {});

}  // namespace nexus::server
