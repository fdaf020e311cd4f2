#include "server/responses/stored_responses.h"

#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/api_error.h"

namespace nexus::server {

namespace {

using nlohmann::json;

// GET /v1/responses/{id}/input_items?limit=&order=&after= (OpenAI's list
// shape): `limit` 1..100 (default 20), `order` desc (the default, newest
// first) or asc, `after` an item id; the items with their ids.
HttpReply input_items_page(const StoredResponse& stored, std::string_view query) {
  int64_t limit = 20;
  bool desc = true;
  std::string after;
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view kv = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    const size_t eq = kv.find('=');
    const std::string_view key = kv.substr(0, eq);
    const std::string value(eq == std::string_view::npos ? std::string_view() : kv.substr(eq + 1));
    if (key == "limit") {
      const bool digits = !value.empty() && value.size() <= 3 &&
                          std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; });
      limit = digits ? std::stoll(value) : 0;
      if (limit < 1 || limit > 100)
        return error_reply(bad_request("Invalid 'limit': expected an integer from 1 to 100.", "limit", "invalid_value"));
    } else if (key == "order") {
      if (value != "asc" && value != "desc")
        return error_reply(bad_request("Invalid 'order': expected asc or desc.", "order", "invalid_value"));
      desc = value == "desc";
    } else if (key == "after") {
      after = value;
    }  // include[] and others: nothing to add to items kept whole
  }
  std::vector<const nlohmann::ordered_json*> items;
  for (const auto& item : stored.input_items) items.push_back(&item);
  if (desc) std::reverse(items.begin(), items.end());
  size_t start = 0;
  if (!after.empty()) {
    while (start < items.size() && (*items[start]).value("id", "") != after) ++start;
    if (start == items.size())
      return error_reply(bad_request("Invalid 'after': no input item of this response has id '" + printable(after) + "'.",
                                     "after", "invalid_value"));
    ++start;
  }
  json data = json::array();
  for (size_t i = start; i < items.size() && data.size() < static_cast<size_t>(limit); ++i)
    data.push_back(json::parse(items[i]->dump()));
  json body = {{"object", "list"}, {"data", data}, {"has_more", start + data.size() < items.size()}};
  body["first_id"] = data.empty() ? json() : data.front()["id"];
  body["last_id"] = data.empty() ? json() : data.back()["id"];
  return HttpReply{200, body.dump(), {}};
}

}  // namespace

HttpReply stored_response_reply(ResponseStore& store, std::string_view method, std::string_view rest,
                                std::string_view query) {
  std::string_view id = rest;
  std::string_view sub;
  if (const size_t slash = rest.find('/'); slash != std::string_view::npos) {
    id = rest.substr(0, slash);
    sub = rest.substr(slash + 1);
  }
  const auto stored = store.get(std::string(id));
  const auto not_found = [&] {
    return error_reply(ApiError(404, "Response with id '" + printable(id) + "' not found.", "", "not_found",
                                "invalid_request_error"));
  };
  if (!stored || (!sub.empty() && sub != "input_items" && sub != "cancel")) return not_found();
  if (sub == "cancel")
    return error_reply(bad_request("Only responses created with background=true can be cancelled; this one has "
                                   "finished.", "", "response_not_cancellable"));
  if (sub == "input_items") return input_items_page(*stored, query);
  if (method == "DELETE") {
    store.erase(std::string(id));
    return HttpReply{200, json{{"id", id}, {"object", "response"}, {"deleted", true}}.dump(), {}};
  }
  return HttpReply{200, stored->response.dump(), {}};
}

}  // namespace nexus::server
