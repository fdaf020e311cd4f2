#include "support/registry_server.h"

#include <openssl/evp.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <optional>
#include <regex>

namespace nexus::test {
namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

RegistryServer::RegistryServer() : acceptor_(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {
  port_ = acceptor_.local_endpoint().port();
  accept_thread_ = std::thread([this] { accept_loop(); });
}

RegistryServer::~RegistryServer() {
  stopping_ = true;
  try {  // wake the blocking accept()
    asio::io_context io;
    tcp::socket s(io);
    s.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port_));
  } catch (const std::exception&) {
  }
  accept_thread_.join();
  std::vector<std::thread> conns;
  {
    std::lock_guard lock(mu_);
    conns.swap(connections_);
  }
  for (std::thread& t : conns) t.join();
}

std::string RegistryServer::url() const { return fmt::format("http://127.0.0.1:{}", port_); }

std::string RegistryServer::sha256_hex(const std::string& bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(bytes.data(), bytes.size(), md, &len, EVP_sha256(), nullptr);
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) hex += fmt::format("{:02x}", md[i]);
  return hex;
}

void RegistryServer::add_hf_file(const std::string& repo, const std::string& path, std::string bytes,
                                 std::string stated_sha256) {
  std::lock_guard lock(mu_);
  const std::string sha = stated_sha256.empty() ? sha256_hex(bytes) : stated_sha256;
  blobs_.push_back({std::move(bytes), sha});
  hf_repos_[repo].emplace_back(path, blobs_.size() - 1);
}

void RegistryServer::add_ollama_model(const std::string& name, const std::string& tag, std::string bytes) {
  std::lock_guard lock(mu_);
  const std::string sha = sha256_hex(bytes);
  blobs_.push_back({std::move(bytes), sha});
  ollama_[name + ":" + tag] = blobs_.size() - 1;
}

void RegistryServer::cut_next_downloads(int n, uint64_t at_byte) {
  std::lock_guard lock(mu_);
  cuts_left_ = n;
  cut_at_ = at_byte;
}

std::vector<RegistryServer::Seen> RegistryServer::requests() const {
  std::lock_guard lock(mu_);
  return seen_;
}

std::vector<RegistryServer::Seen> RegistryServer::requests_to(const std::string& prefix) const {
  std::vector<Seen> out;
  for (const Seen& s : requests())
    if (s.target.starts_with(prefix)) out.push_back(s);
  return out;
}

void RegistryServer::accept_loop() {
  for (;;) {
    tcp::socket s(io_);
    boost::system::error_code ec;
    acceptor_.accept(s, ec);
    if (stopping_) return;
    if (ec) continue;
    std::lock_guard lock(mu_);
    connections_.emplace_back([this, sock = std::move(s)]() mutable { serve(std::move(sock)); });
  }
}

void RegistryServer::serve(tcp::socket s) {
  boost::beast::flat_buffer buf;
  for (;;) {
    http::request<http::string_body> req;
    boost::system::error_code ec;
    http::read(s, buf, req, ec);
    if (ec) return;
    const std::string target(req.target());
    Seen seen{std::string(req.method_string()), target, std::string(req[http::field::range]),
              std::string(req[http::field::authorization])};
    http::response<http::string_body> res{http::status::not_found, req.version()};
    res.set(http::field::content_type, "application/json");
    res.body() = R"({"error":"not found"})";
    std::optional<size_t> cdn;  // a file to send raw
    bool cut = false;
    uint64_t cut_at = 0;
    {
      std::lock_guard lock(mu_);
      seen_.push_back(seen);
      std::smatch m;
      static const std::regex tree(R"(^/api/models/([^/]+/[^/]+)/tree/main(\?.*)?$)");
      static const std::regex resolve(R"(^/([^/]+/[^/]+)/resolve/main/(.+)$)");
      static const std::regex manifest(R"(^/v2/([^/]+/[^/]+)/manifests/([^/]+)$)");
      static const std::regex blob(R"(^/v2/([^/]+/[^/]+)/blobs/sha256:([0-9a-f]{64})$)");
      static const std::regex cdn_re(R"(^/cdn/(\d+)$)");
      if (std::regex_match(target, m, tree) && hf_repos_.count(m[1])) {
        nlohmann::json files = nlohmann::json::array();
        for (const auto& [path, id] : hf_repos_[m[1]]) {
          const Blob& b = blobs_[id];
          files.push_back({{"type", "file"}, {"oid", "0123456789abcdef0123456789abcdef01234567"}, {"size", b.bytes.size()},
                           {"path", path}, {"lfs", {{"oid", b.sha256}, {"size", b.bytes.size()}, {"pointerSize", 134}}}});
        }
        res.result(http::status::ok);
        res.body() = files.dump();
      } else if (std::regex_match(target, m, resolve) && hf_repos_.count(m[1])) {
        for (const auto& [path, id] : hf_repos_[m[1]])
          if (path == m[2].str()) {
            res.result(http::status::found);
            res.set(http::field::location, fmt::format("/cdn/{}", id));
            res.set("X-Linked-ETag", "\"" + blobs_[id].sha256 + "\"");
            res.set("X-Linked-Size", std::to_string(blobs_[id].bytes.size()));
            res.body().clear();
          }
      } else if (std::regex_match(target, m, manifest) && ollama_.count(m[1].str() + ":" + m[2].str())) {
        const Blob& b = blobs_[ollama_[m[1].str() + ":" + m[2].str()]];
        const nlohmann::json j = {
            {"schemaVersion", 2},
            {"mediaType", "application/vnd.docker.distribution.manifest.v2+json"},
            {"config", {{"mediaType", "application/vnd.docker.container.image.v1+json"}, {"digest", "sha256:" + std::string(64, '0')}, {"size", 2}}},
            {"layers",
             {{{"mediaType", "application/vnd.ollama.image.template"}, {"digest", "sha256:" + std::string(64, '1')}, {"size", 10}},
              {{"mediaType", "application/vnd.ollama.image.model"}, {"digest", "sha256:" + b.sha256}, {"size", b.bytes.size()}}}}};
        res.result(http::status::ok);
        res.set(http::field::content_type, "application/vnd.docker.distribution.manifest.v2+json");
        res.body() = j.dump();
      } else if (std::regex_match(target, m, blob)) {
        for (size_t id = 0; id < blobs_.size(); ++id)
          if (blobs_[id].sha256 == m[2].str()) {
            res.result(http::status::temporary_redirect);
            res.set(http::field::location, fmt::format("/cdn/{}", id));
            res.body().clear();
          }
      } else if (std::regex_match(target, m, cdn_re) && std::stoul(m[1]) < blobs_.size()) {
        cdn = std::stoul(m[1]);
        if (cuts_left_ > 0) {
          --cuts_left_;
          cut = true;
          cut_at = cut_at_;
        }
      }
    }
    if (!cdn) {
      res.keep_alive(req.keep_alive());
      res.prepare_payload();
      http::write(s, res, ec);
      if (ec || !req.keep_alive()) return;
      continue;
    }
    // The file, by hand so that it can be cut after any byte.
    const std::string& bytes = blobs_[*cdn].bytes;  // blobs_ only grows before the clients start
    uint64_t first = 0;
    const std::string range = seen.range;
    if (range.starts_with("bytes=")) first = std::stoull(range.substr(6));
    std::string head;
    if (first >= bytes.size() && !range.empty()) {
      head = fmt::format("HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */{}\r\nContent-Length: 0\r\n\r\n",
                         bytes.size());
      asio::write(s, asio::buffer(head), ec);
      continue;
    }
    if (range.empty())
      head = fmt::format("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nAccept-Ranges: bytes\r\n\r\n", bytes.size());
    else
      head = fmt::format(
          "HTTP/1.1 206 Partial Content\r\nContent-Length: {}\r\nContent-Range: bytes {}-{}/{}\r\nAccept-Ranges: bytes\r\n\r\n",
          bytes.size() - first, first, bytes.size() - 1, bytes.size());
    asio::write(s, asio::buffer(head), ec);
    const uint64_t end = cut ? std::min<uint64_t>(bytes.size(), first + cut_at) : bytes.size();
    for (uint64_t at = first; !ec && at < end;) {
      const uint64_t n = std::min<uint64_t>(16384, end - at);
      asio::write(s, asio::buffer(bytes.data() + at, n), ec);
      at += n;
      if (delay_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_));
    }
    if (cut || ec) return;  // closing the socket mid-body is the cut
  }
}

}  // namespace nexus::test
