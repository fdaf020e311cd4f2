#include "store/http_fetch.h"

#include <curl/curl.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>

#include <fmt/format.h>

namespace nexus::store {
namespace {

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct CurlDeleter {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
struct SlistDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};

struct Transfer {
  std::unique_ptr<CURL, CurlDeleter> curl;
  std::unique_ptr<curl_slist, SlistDeleter> headers;
  std::map<std::string, std::string> response_headers;
  char error[CURL_ERROR_SIZE] = {};
};

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::string line(data, size * n);
  // A new status line (a redirect's next hop): keep only the final response's headers.
  if (line.starts_with("HTTP/")) t->response_headers.clear();
  const size_t colon = line.find(':');
  if (colon != std::string::npos) {
    std::string name = line.substr(0, colon);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string value = line.substr(colon + 1);
    const size_t b = value.find_first_not_of(" \t"), e = value.find_last_not_of(" \t\r\n");
    t->response_headers[name] = b == std::string::npos ? "" : value.substr(b, e - b + 1);
  }
  return size * n;
}

void setup(Transfer& t, const HttpRequest& req) {
  global_init();
  t.curl.reset(curl_easy_init());
  if (!t.curl) throw Error("curl_easy_init failed");
  CURL* c = t.curl.get();
  curl_easy_setopt(c, CURLOPT_URL, req.url.c_str());
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, req.follow_redirects ? 1L : 0L);
  curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 15L);
  // A stalled transfer (under 1 byte/s for 30 s) fails like a cut one.
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 30L);
  curl_easy_setopt(c, CURLOPT_USERAGENT, "nexus/0.1");
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, t.error);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &t);
  if (req.head) curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  curl_slist* list = nullptr;
  for (const std::string& h : req.headers) list = curl_slist_append(list, h.c_str());
  t.headers.reset(list);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, list);
}

[[noreturn]] void throw_transport(Transfer& t, CURLcode rc, const std::string& url) {
  long status = 0;
  curl_easy_getinfo(t.curl.get(), CURLINFO_RESPONSE_CODE, &status);
  const std::string detail = t.error[0] ? t.error : curl_easy_strerror(rc);
  const bool connected = status != 0 && rc != CURLE_COULDNT_RESOLVE_HOST && rc != CURLE_COULDNT_CONNECT &&
                         rc != CURLE_COULDNT_RESOLVE_PROXY;
  throw NetworkError(fmt::format("{}: {}", url_host(url), detail), connected);
}

struct MemorySink {
  std::string* body;
  size_t max;
  bool too_long = false;
};

size_t on_memory(char* data, size_t size, size_t n, void* user) {
  auto* s = static_cast<MemorySink*>(user);
  if (s->body->size() + size * n > s->max) {
    s->too_long = true;
    return 0;
  }
  s->body->append(data, size * n);
  return size * n;
}

struct FileSink {
  CURL* curl;
  int fd;
  uint64_t offset;  // bytes in the file
  bool started = false;
  bool write_failed = false;
  int error = 0;
  const std::function<void(uint64_t)>* on_bytes;
  const std::map<std::string, std::string>* headers;
  bool bad_range = false;
};

// The first byte of "Content-Range: bytes START-END/TOTAL" (RFC 9110 14.4).
std::optional<uint64_t> range_start(const std::map<std::string, std::string>& h) {
  const auto it = h.find("content-range");
  if (it == h.end() || !it->second.starts_with("bytes ")) return std::nullopt;
  try {
    return std::stoull(it->second.substr(6));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

size_t on_file(char* data, size_t size, size_t n, void* user) {
  auto* s = static_cast<FileSink*>(user);
  long status = 0;
  curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &status);
  if (status >= 300) return size * n;  // an error page: not model bytes
  if (!s->started) {
    s->started = true;
    if (status == 200 && s->offset > 0) {  // the Range was ignored: the whole file comes again
      if (::ftruncate(s->fd, 0) != 0 || ::lseek(s->fd, 0, SEEK_SET) != 0) {
        s->write_failed = true;
        s->error = errno;
        return 0;
      }
      s->offset = 0;
    }
    if (status == 206 && range_start(*s->headers) != s->offset) {  // not the bytes that follow ours
      s->bad_range = true;
      return 0;
    }
  }
  for (size_t done = 0; done < size * n;) {
    const ssize_t w = ::write(s->fd, data + done, size * n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      s->write_failed = true;
      s->error = errno;
      return 0;
    }
    done += static_cast<size_t>(w);
  }
  s->offset += size * n;
  if (*s->on_bytes) (*s->on_bytes)(s->offset);
  return size * n;
}

}  // namespace

std::string url_host(const std::string& url) {
  size_t b = url.find("://");
  b = b == std::string::npos ? 0 : b + 3;
  const size_t e = url.find_first_of("/?#", b);
  return url.substr(b, e == std::string::npos ? std::string::npos : e - b);
}

HttpResponse http_fetch(const HttpRequest& req, size_t max_body) {
  Transfer t;
  setup(t, req);
  HttpResponse r;
  MemorySink sink{&r.body, max_body};
  curl_easy_setopt(t.curl.get(), CURLOPT_WRITEFUNCTION, on_memory);
  curl_easy_setopt(t.curl.get(), CURLOPT_WRITEDATA, &sink);
  const CURLcode rc = curl_easy_perform(t.curl.get());
  if (sink.too_long) throw Error(fmt::format("{}: the answer is longer than {} bytes", req.url, max_body));
  if (rc != CURLE_OK) throw_transport(t, rc, req.url);
  curl_easy_getinfo(t.curl.get(), CURLINFO_RESPONSE_CODE, &r.status);
  r.headers = std::move(t.response_headers);
  return r;
}

long http_download(const HttpRequest& req, int fd, uint64_t offset, const std::function<void(uint64_t)>& on_bytes) {
  Transfer t;
  setup(t, req);
  FileSink sink{t.curl.get(), fd, offset, false, false, 0, &on_bytes, &t.response_headers};
  const std::string range = fmt::format("{}-", offset);
  if (offset > 0) curl_easy_setopt(t.curl.get(), CURLOPT_RANGE, range.c_str());
  curl_easy_setopt(t.curl.get(), CURLOPT_WRITEFUNCTION, on_file);
  curl_easy_setopt(t.curl.get(), CURLOPT_WRITEDATA, &sink);
  const CURLcode rc = curl_easy_perform(t.curl.get());
  if (sink.bad_range)
    throw Error(fmt::format("{}: the server resumed at another byte than {} (Content-Range)", req.url, offset));
  if (sink.write_failed) throw Error(fmt::format("cannot write the download: {}", std::strerror(sink.error)));
  if (rc != CURLE_OK) throw_transport(t, rc, req.url);
  long status = 0;
  curl_easy_getinfo(t.curl.get(), CURLINFO_RESPONSE_CODE, &status);
  return status;
}

}  // namespace nexus::store
