// TLS termination on the gateway (`--tls-cert`, `--tls-key`) with a
// self-signed certificate the test makes with the openssl CLI (never a
// committed key), checked by a real client (libcurl, verifying the
// certificate against it as the CA): a non-streamed request, a stream, two
// requests over one kept-alive TLS connection, a plain-HTTP client on the
// TLS port (refused, the gateway unharmed), API keys over TLS, and a key
// that does not match the certificate (the gateway refuses to start).
#include <gtest/gtest.h>

#include <curl/curl.h>
#include <sys/socket.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>

#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

#include "support/gateway_process.h"
#include "support/http_client.h"
#include "support/test_support.h"

using namespace nexus::test;
using nlohmann::json;

namespace {

struct TestCert {
  std::string dir, cert, key, other_key;
  bool made = false;
};

// A P-256 key and a self-signed certificate for 127.0.0.1 and localhost.
TestCert make_cert() {
  TestCert c;
  c.dir = make_temp_dir();
  c.cert = c.dir + "/cert.pem";
  c.key = c.dir + "/key.pem";
  c.other_key = c.dir + "/other.pem";
  const std::string cmd =
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 -subj /CN=localhost "
      "-addext subjectAltName=IP:127.0.0.1,DNS:localhost -keyout " + shell_quote(c.key) + " -out " +
      shell_quote(c.cert) + " >/dev/null 2>&1 && openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out " +
      shell_quote(c.other_key) + " >/dev/null 2>&1";
  c.made = std::system(cmd.c_str()) == 0;
  return c;
}

struct CurlReply {
  CURLcode code = CURLE_OK;
  long status = 0;
  std::string body, error;
  long new_connections = -1;
};

size_t append(char* p, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(p, size * n);
  return size * n;
}

// One request on `h` (reused across calls: libcurl keeps the connection).
CurlReply curl_request(CURL* h, const std::string& url, const std::string& ca, const std::string& body,
                       const std::string& key = "") {
  CurlReply r;
  char err[CURL_ERROR_SIZE] = {0};
  curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
  if (!key.empty()) headers = curl_slist_append(headers, ("Authorization: Bearer " + key).c_str());
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_CAINFO, ca.c_str());
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(h, CURLOPT_TIMEOUT, 30L);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, err);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, append);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &r.body);
  if (!body.empty()) curl_easy_setopt(h, CURLOPT_POSTFIELDS, body.c_str());
  else curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
  r.code = curl_easy_perform(h);
  r.error = err;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r.status);
  curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &r.new_connections);
  curl_slist_free_all(headers);
  return r;
}

struct Curl {
  Curl() : h(curl_easy_init()) {}
  ~Curl() { curl_easy_cleanup(h); }
  CURL* h;
};

}  // namespace

TEST(GatewayTls, HttpsRoundTripsStreamsAndKeepsTheConnection) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  const TestCert cert = make_cert();
  ASSERT_TRUE(cert.made) << "openssl could not make the test certificate";
  ReplicaSet rs(model, 1);
  ASSERT_TRUE(rs.all_started());
  const std::string keys = cert.dir + "/keys.txt";
  std::ofstream(keys) << "sk-tls tls-tenant\n";
  GatewayProcess gw(rs.ports, {"--tls-cert", cert.cert, "--tls-key", cert.key, "--api-keys", keys});
  ASSERT_GT(gw.port, 0);
  const std::string base = "https://127.0.0.1:" + std::to_string(gw.port);
  Curl c;

  const CurlReply health = curl_request(c.h, base + "/health", cert.cert, "");
  ASSERT_EQ(health.code, CURLE_OK) << health.error;
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.new_connections, 1);

  const json req = {{"prompt", "Once upon a time"}, {"max_tokens", 8}, {"ignore_eos", true}};
  const CurlReply plain = curl_request(c.h, base + "/v1/completions", cert.cert, req.dump(), "sk-tls");
  ASSERT_EQ(plain.code, CURLE_OK) << plain.error;
  EXPECT_EQ(plain.status, 200) << plain.body;
  EXPECT_EQ(json::parse(plain.body)["usage"]["completion_tokens"], 8);
  EXPECT_EQ(plain.new_connections, 0);  // the same TLS connection

  json stream_req = req;
  stream_req["stream"] = true;
  const CurlReply stream = curl_request(c.h, base + "/v1/completions", cert.cert, stream_req.dump(), "sk-tls");
  ASSERT_EQ(stream.code, CURLE_OK) << stream.error;
  EXPECT_EQ(stream.status, 200);
  EXPECT_EQ(stream.new_connections, 0);
  const auto events = split_sse(stream.body);
  ASSERT_TRUE(events) << stream.body;
  ASSERT_GE(events->size(), 9u);
  EXPECT_EQ(events->back(), "[DONE]");
  int text_events = 0;
  for (const auto& e : *events) text_events += e.find("\"text\":") != std::string::npos;
  EXPECT_GE(text_events, 8);

  const CurlReply no_key = curl_request(c.h, base + "/v1/completions", cert.cert, req.dump());
  EXPECT_EQ(no_key.status, 401);

  // A client that does not trust the certificate fails the handshake.
  Curl untrusting;
  const CurlReply refused = curl_request(untrusting.h, base + "/health", "/nonexistent-ca.pem", "");
  EXPECT_NE(refused.code, CURLE_OK);

  // Plain HTTP on the TLS port: no HTTP answer, and the gateway goes on.
  {
    HttpClient raw("127.0.0.1", gw.port, std::chrono::seconds(10));
    raw.write_raw("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
    EXPECT_TRUE(raw.wait_closed_by_peer());
  }
  Curl again;
  const CurlReply after = curl_request(again.h, base + "/health", cert.cert, "");
  EXPECT_EQ(after.code, CURLE_OK) << after.error;
  EXPECT_EQ(after.status, 200);
}

TEST(GatewayTls, BenchMeasuresThroughHttpsVerifyingTheCertificate) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  const TestCert cert = make_cert();
  ASSERT_TRUE(cert.made) << "openssl could not make the test certificate";
  ReplicaSet rs(model, 1);
  ASSERT_TRUE(rs.all_started());
  GatewayProcess gw(rs.ports, {"--tls-cert", cert.cert, "--tls-key", cert.key});
  ASSERT_GT(gw.port, 0);
  const std::string url = "https://127.0.0.1:" + std::to_string(gw.port);
  for (const std::string transport : {"http", "http-keepalive", "ws"}) {  // ws: realtime sessions over wss://
    SCOPED_TRACE(transport);
    const std::string out = cert.dir + "/" + transport + ".json";
    const CommandResult r = run_nexus("bench --url " + url + " --cacert " + shell_quote(cert.cert) + " --transport " +
                                      transport + " --concurrency 2 --requests 6 --max-tokens 4 --ignore-eos"
                                      " --prompt-tokens 8 --no-progress --json " + shell_quote(out));
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    const json j = json::parse(read_file(out), nullptr, false);
    ASSERT_TRUE(j.is_object()) << read_file(out);
    const json& p = j["phases"][0];
    EXPECT_EQ(p["completed"], 6);
    EXPECT_EQ(p["failed"], 0);
    EXPECT_EQ(p["usage_missing"], 0);  // streamed, with the usage chunk it asked for
    // ws: one connection per session (here 6 one-turn sessions).
    EXPECT_EQ(p["connections_opened"], transport == "http-keepalive" ? 2 : 6);
  }
  // Without the CA the certificate is refused; --insecure accepts it.
  const CommandResult untrusted = run_nexus("bench --url " + url + " --requests 1 --max-tokens 2 --no-progress");
  EXPECT_NE(untrusted.exit_code, 0);
  EXPECT_NE((untrusted.out + untrusted.err).find("certificate"), std::string::npos) << untrusted.err;
  const CommandResult insecure =
      run_nexus("bench --url " + url + " --insecure --requests 2 --max-tokens 2 --no-progress");
  EXPECT_EQ(insecure.exit_code, 0) << insecure.out << insecure.err;
}

TEST(GatewayTls, RealtimeSessionOverWss) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  const TestCert cert = make_cert();
  ASSERT_TRUE(cert.made) << "openssl could not make the test certificate";
  ReplicaSet rs(model, 1);
  ASSERT_TRUE(rs.all_started());
  GatewayProcess gw(rs.ports, {"--tls-cert", cert.cert, "--tls-key", cert.key});
  ASSERT_GT(gw.port, 0);
  namespace net = boost::asio;
  namespace ws = boost::beast::websocket;
  net::io_context ioc;
  net::ssl::context tls(net::ssl::context::tls_client);
  tls.load_verify_file(cert.cert);
  tls.set_verify_mode(net::ssl::verify_peer);
  ws::stream<net::ssl::stream<net::ip::tcp::socket>> c(ioc, tls);
  net::ip::tcp::socket& sock = c.next_layer().next_layer();
  sock.connect({net::ip::make_address("127.0.0.1"), gw.port});
  const timeval limit{10, 0};  // a broken relay fails the read instead of hanging the test
  setsockopt(sock.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c.next_layer().native_handle()), "127.0.0.1");
  c.next_layer().handshake(net::ssl::stream_base::client);
  c.handshake("127.0.0.1:" + std::to_string(gw.port), "/v1/realtime");
  boost::beast::flat_buffer buf;
  auto next = [&] {
    buf.clear();
    c.read(buf);
    return json::parse(boost::beast::buffers_to_string(buf.data()));
  };
  EXPECT_EQ(next()["type"], "session.created");
  c.write(net::buffer(json{{"type", "input.append"}, {"text", "Once upon a time"}}.dump()));
  c.write(net::buffer(json{{"type", "response.create"}, {"response", {{"max_tokens", 3}}}}.dump()));
  json ev;
  int deltas = 0;
  for (int i = 0; i < 20; ++i) {
    ev = next();
    deltas += ev["type"] == "response.delta";
    if (ev["type"] == "response.done" || ev["type"] == "error") break;
  }
  EXPECT_EQ(ev["type"], "response.done") << ev;
  EXPECT_EQ(ev["response"]["usage"]["completion_tokens"], 3);
  EXPECT_GE(deltas, 1);
  c.close(ws::close_code::normal);
}

TEST(GatewayTls, RefusesToStartWithAKeyThatDoesNotMatchTheCertificate) {
  const TestCert cert = make_cert();
  ASSERT_TRUE(cert.made) << "openssl could not make the test certificate";
  const CommandResult r = run_nexus("gateway --listen 127.0.0.1:0 --replica http://127.0.0.1:9 --tls-cert " +
                                    shell_quote(cert.cert) + " --tls-key " + shell_quote(cert.other_key));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("is it the key of"), std::string::npos) << r.err;
  const CommandResult half = run_nexus("gateway --listen 127.0.0.1:0 --replica http://127.0.0.1:9 --tls-cert " +
                                       shell_quote(cert.cert));
  EXPECT_NE(half.exit_code, 0);
  EXPECT_NE(half.err.find("tls-key"), std::string::npos) << half.err;
}
