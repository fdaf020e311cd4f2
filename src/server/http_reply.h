// HttpReply: a whole HTTP response the session sends as it is (status,
// body, extra headers, content type).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "server/api_error.h"

namespace nexus::server {

struct HttpReply {
  int status = 200;
  std::string body;  // JSON unless content_type says otherwise
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers
  std::string content_type = "application/json";
};

// An ApiError in OpenAI's shape (api_error.h).
HttpReply error_reply(const ApiError& e);

}  // namespace nexus::server
