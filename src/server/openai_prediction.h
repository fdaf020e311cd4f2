// The `prediction` field of POST /v1/completions and /v1/chat/completions
// (OpenAI's Predicted Outputs): {"type": "content", "content": string |
// [{"type": "text", "text": string}, ...]} (parts joined without separator).
// The text is tokenized without BOS and without special tokens
// (prompt_builder) and proposed for speculative decoding where it lines up
// with the output (engine/spec/prediction.h states the alignment rule). It
// never changes the output, only how fast it comes; usage then reports
// completion_tokens_details.accepted_prediction_tokens and
// rejected_prediction_tokens.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace nexus::server {

// The prediction's text, nullopt when the field is absent or null. Throws
// ApiError 400 (param "prediction") when it is not such an object, its type
// is not "content", or its content is neither form above.
std::optional<std::string> parse_prediction(const nlohmann::json& doc);

}  // namespace nexus::server
