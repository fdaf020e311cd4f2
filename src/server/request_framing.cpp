#include "server/request_framing.h"

#include <boost/beast/core/string.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace nexus::server {
namespace {

namespace http = boost::beast::http;

// The transfer codings of every Transfer-Encoding field, in order, lower-case,
// without parameters ("gzip;q=1" -> "gzip"); an empty element stays "".
std::vector<std::string> transfer_codings(const http::fields& headers) {
  std::vector<std::string> codings;
  for (auto it = headers.find(http::field::transfer_encoding);
       it != headers.end() && it->name() == http::field::transfer_encoding; ++it) {
    const std::string_view v(it->value().data(), it->value().size());
    size_t start = 0;
    while (start <= v.size()) {
      size_t end = v.find(',', start);
      if (end == std::string_view::npos) end = v.size();
      std::string_view item = v.substr(start, end - start);
      item = item.substr(0, item.find(';'));
      while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
      while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
      std::string lower(item);
      for (char& c : lower) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
      codings.push_back(std::move(lower));
      start = end + 1;
    }
  }
  return codings;
}

ApiError bad_framing(std::string message) {
  return ApiError(400, std::move(message), "", "bad_http_request");
}

ApiError uri_too_long() {
  return ApiError(414, "The request target is longer than " + std::to_string(kMaxTargetBytes) + " bytes.", "",
                  "uri_too_long");
}

}  // namespace

std::optional<ApiError> request_target_error(std::string_view target) {
  if (target.size() > kMaxTargetBytes) return uri_too_long();
  return std::nullopt;
}

ApiError header_too_large_error(std::string_view target, std::string_view buffered) {
  if (target.size() > kMaxTargetBytes) return uri_too_long();
  // "OPTIONS " + target + " HTTP/1.1": the longest method Nexus knows plus
  // the version; a longer line has a target over the limit.
  constexpr size_t kMaxRequestLine = kMaxTargetBytes + 32;
  const size_t eol = buffered.find("\r\n");
  const size_t line = eol == std::string_view::npos ? buffered.size() : eol;
  if (target.empty() && line > kMaxRequestLine) return uri_too_long();
  return ApiError(431, "The request headers are larger than " + std::to_string(kMaxHeaderBytes) + " bytes.", "",
                  "headers_too_large");
}

std::optional<ApiError> request_framing_error(const http::fields& headers, unsigned version) {
  if (version >= 11 && headers.count(http::field::host) != 1)
    return bad_framing(headers.count(http::field::host) == 0 ? "An HTTP/1.1 request needs a Host header."
                                                               : "The request has more than one Host header.");
  if (headers.count(http::field::transfer_encoding) == 0) return std::nullopt;
  if (headers.count(http::field::content_length) != 0)
    return bad_framing("The request has both Transfer-Encoding and Content-Length; send one.");
  const std::vector<std::string> codings = transfer_codings(headers);
  size_t chunked = 0;
  for (const std::string& c : codings) {
    if (c.empty()) return bad_framing("The request's Transfer-Encoding has an empty coding.");
    chunked += c == "chunked";
  }
  if (codings.back() != "chunked")
    return bad_framing("The request's Transfer-Encoding must end with chunked (it is '" + codings.back() +
                       "'): its body length cannot be known.");
  if (chunked > 1) return bad_framing("The request's Transfer-Encoding names chunked more than once.");
  for (const std::string& c : codings)
    if (c != "chunked")
      return ApiError(501, "Transfer-Encoding '" + c + "' is not implemented; send the body as it is.", "",
                      "unsupported_transfer_encoding", "server_error");
  return std::nullopt;
}

std::optional<std::string> origin_form(std::string_view target) {
  size_t scheme = 0;
  for (const std::string_view prefix : {"http://", "https://"})
    if (target.size() >= prefix.size() &&
        boost::beast::iequals(boost::beast::string_view(target.data(), prefix.size()),
                              boost::beast::string_view(prefix.data(), prefix.size())))
      scheme = prefix.size();
  if (scheme == 0) return std::nullopt;
  const size_t path = target.find_first_of("/?", scheme);  // the authority ends at the path or the query
  if (path == std::string_view::npos) return std::string("/");
  if (target[path] == '?') return "/" + std::string(target.substr(path));
  return std::string(target.substr(path));
}

}  // namespace nexus::server
