// The routes of stored responses (OpenAI's API reference, "Responses"):
//   GET /v1/responses/{id}                 the response object as returned
//   DELETE /v1/responses/{id}              {"id", "object": "response", "deleted": true}
//   GET /v1/responses/{id}/input_items     OpenAI's list shape: ?limit= 1..100
//                                          (default 20), order= desc (default,
//                                          newest first) | asc, after= an item id;
//                                          {"object": "list", "data", "first_id",
//                                          "last_id", "has_more"}
//   POST /v1/responses/{id}/cancel         400 response_not_cancellable (only
//                                          background responses can be; Nexus has none)
// An id the store does not hold (or another sub-path): 404 not_found.
#pragma once

#include <string_view>

#include "server/http_reply.h"
#include "server/responses/response_store.h"

namespace nexus::server {

// `rest`: the path after "/v1/responses/"; `query`: the query string ("" when none).
HttpReply stored_response_reply(ResponseStore& store, std::string_view method, std::string_view rest,
                                std::string_view query);

}  // namespace nexus::server
