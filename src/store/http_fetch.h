// HTTP(S) requests for `nexus pull`, over libcurl (redirects followed).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "util/error.h"

namespace nexus::store {

// The server could not be reached or the connection broke (DNS, refused,
// reset, cut mid-body, stalled for 30 s). `connected` says whether any
// response began: false means "offline or wrong address".
class NetworkError : public Error {
 public:
  NetworkError(const std::string& what, bool connected) : Error(what), connected_(connected) {}
  bool connected() const { return connected_; }

 private:
  bool connected_;
};

struct HttpRequest {
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  bool follow_redirects = true;      // up to 10; Authorization is not sent to another host
  bool head = false;                 // HEAD: headers only
};

struct HttpResponse {
  long status = 0;
  std::map<std::string, std::string> headers;  // the final response's, names lower-cased
  std::string body;
};

// GET (or HEAD) into memory, at most `max_body` bytes (a longer body throws
// Error). Any status comes back; transport failures throw NetworkError.
HttpResponse http_fetch(const HttpRequest& req, size_t max_body = size_t{64} << 20);

// GET appending the body to the open file `fd`, which holds `offset` bytes
// already: with offset > 0 asks for "Range: bytes=OFFSET-". A 206 answer is
// appended; a 200 answer (the server ignored the Range) truncates the file
// and starts over; any status >= 300 writes nothing. on_bytes(total bytes in
// the file) is called as data arrives. Returns the final status; throws
// NetworkError when the connection fails or is cut (the bytes written so far
// stay in the file), Error when writing fails.
long http_download(const HttpRequest& req, int fd, uint64_t offset, const std::function<void(uint64_t)>& on_bytes);

// "host" of a URL, for messages.
std::string url_host(const std::string& url);

}  // namespace nexus::store
