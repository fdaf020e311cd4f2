// RegistryServer: a loopback HTTP server with the URL layout and headers of
// the Hugging Face Hub and the Ollama registry, for `nexus pull` tests
// (HF_ENDPOINT / NEXUS_OLLAMA_REGISTRY pointed at url()):
//   GET /api/models/OWNER/REPO/tree/main        JSON file list with lfs.oid (SHA-256)
//   GET|HEAD /OWNER/REPO/resolve/main/PATH      302 to /cdn/ID (X-Linked-ETag, X-Linked-Size)
//   GET /v2/NS/NAME/manifests/TAG               manifest with the application/vnd.ollama.image.model layer
//   GET /v2/NS/NAME/blobs/sha256:HEX            307 to /cdn/ID
//   GET /cdn/ID                                 the bytes; Range: bytes=N- answered 206 + Content-Range
// Faults on demand: a stated SHA-256 that is wrong, the next N file
// responses cut (connection closed) after a byte count, a delay per 16 KiB.
// Boost.Beast, synchronous, one thread per connection; every request is recorded.
#pragma once

#include <boost/asio/ip/tcp.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace nexus::test {

class RegistryServer {
 public:
  RegistryServer();
  ~RegistryServer();
  RegistryServer(const RegistryServer&) = delete;
  RegistryServer& operator=(const RegistryServer&) = delete;

  std::string url() const;  // http://127.0.0.1:PORT

  // A file of Hugging Face repository `repo` ("owner/name"); `stated_sha256`
  // empty: the bytes' real SHA-256.
  void add_hf_file(const std::string& repo, const std::string& path, std::string bytes, std::string stated_sha256 = "");
  // An Ollama model ("library/NAME" or "NS/NAME") whose model layer is `bytes`.
  void add_ollama_model(const std::string& name, const std::string& tag, std::string bytes);

  // The next `n` /cdn responses send `at_byte` bytes of their body, then close.
  void cut_next_downloads(int n, uint64_t at_byte);
  void set_chunk_delay(std::chrono::milliseconds d) { delay_ms_ = static_cast<int>(d.count()); }

  struct Seen {
    std::string method, target, range, authorization;
  };
  std::vector<Seen> requests() const;
  // Requests whose target starts with `prefix`.
  std::vector<Seen> requests_to(const std::string& prefix) const;

  static std::string sha256_hex(const std::string& bytes);

 private:
  struct Blob {
    std::string bytes, sha256;  // sha256: what the registry states
  };
  void accept_loop();
  void serve(boost::asio::ip::tcp::socket s);

  boost::asio::io_context io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread accept_thread_;
  mutable std::mutex mu_;
  std::vector<std::thread> connections_;
  std::vector<Blob> blobs_;                                          // /cdn/ID = blobs_[ID]
  std::map<std::string, std::vector<std::pair<std::string, size_t>>> hf_repos_;  // repo -> (path, blob)
  std::map<std::string, size_t> ollama_;                             // "NS/NAME:TAG" -> blob
  std::vector<Seen> seen_;
  int cuts_left_ = 0;
  uint64_t cut_at_ = 0;
  std::atomic<int> delay_ms_{0};
};

}  // namespace nexus::test
