// The adversarial suite, HTTP and WebSocket framing (issue 26, findings 2, 4
// and 5): each probe against a real `nexus serve`, then the checks of
// probe.h (a normal completion within 100 ms, nothing running, KV idle, RSS
// back within 20 MB). CTest label `adversarial`.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "adversarial/probe.h"
#include "support/http_client.h"
#include "support/ws_client.h"

using namespace nexus::test;
using namespace nexus::test::adversarial;
using nlohmann::json;

namespace {

const std::string kUpgrade = "GET /v1/realtime HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n";
const std::string kKey = "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n";

// The OpenAI error object of a raw response, with its checks.
json error_of(const std::string& raw, int status) {
  EXPECT_EQ(status_of(raw), status) << raw;
  EXPECT_EQ(header_of(raw, "Content-Type"), "application/json") << raw;
  const json j = json::parse(body_of(raw), nullptr, false);
  EXPECT_TRUE(j.is_object() && j.contains("error") && j["error"]["message"].is_string()) << raw;
  return j.is_object() && j.contains("error") ? j["error"] : json::object();
}

class Adversarial : public ProbeSuite<Adversarial> {};

}  // namespace

TEST_F(Adversarial, RequestSmugglingVariantsAreRefusedAndNothingIsSmuggled) {
  const std::string smuggled = "GET /v1/models/SMUGGLED HTTP/1.1\r\nHost: x\r\n\r\n";
  for (const auto& [te, status] : std::vector<std::pair<std::string, int>>{
           {"xchunked", 400}, {"identity", 400}, {"gzip", 400}, {"chunked, xchunked", 400}, {"gzip, chunked", 501}}) {
    const std::string raw =
        server_->exchange("POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: " + te + "\r\n\r\n" + smuggled);
    const json e = error_of(raw, status);
    EXPECT_EQ(e["code"], status == 400 ? "bad_http_request" : "unsupported_transfer_encoding") << te;
    EXPECT_EQ(count_responses(raw), 1u) << te << ": " << raw;
    EXPECT_EQ(raw.find("SMUGGLED"), std::string::npos) << te;
    EXPECT_EQ(header_of(raw, "Connection"), "close") << te;
  }
}

TEST_F(Adversarial, Http11WithoutHostIs400) {
  const json e = error_of(server_->exchange("GET /health HTTP/1.1\r\n\r\n"), 400);
  EXPECT_EQ(e["code"], "bad_http_request");
}

TEST_F(Adversarial, NulInModelRoleAndEventTypeIsQuotedWholeAndEscaped) {
  HttpClient c("127.0.0.1", server_->port());
  const HttpResponse model = c.post("/v1/completions", R"({"model":"stories260K\u0000evil","prompt":"x"})");
  EXPECT_EQ(model.status, 400);
  const std::string m = json::parse(model.body)["error"]["message"];
  EXPECT_NE(m.find(R"('stories260K\x00evil')"), std::string::npos) << m;
  EXPECT_EQ(m.find('\0'), std::string::npos);
  const HttpResponse role = c.post("/v1/chat/completions", R"({"messages":[{"role":"us\u0000er\u001b","content":"x"}]})");
  EXPECT_EQ(role.status, 400);
  const std::string r = json::parse(role.body)["error"]["message"];
  EXPECT_NE(r.find(R"('us\x00er\x1b')"), std::string::npos) << r;
  WsClient ws("127.0.0.1", server_->port());
  EXPECT_EQ(ws.recv_json()["type"], "session.created");
  ws.send_text(R"({"type":"input\u0000.append","text":"x"})");
  const json ev = ws.recv_json();
  EXPECT_EQ(ev["type"], "error");
  const std::string t = ev["error"]["message"];
  EXPECT_NE(t.find(R"('input\x00.append')"), std::string::npos) << ev;
  ws.close();
}

TEST_F(Adversarial, LongRequestTargetIs414) {
  for (const size_t n : {size_t{9000}, size_t{64} << 10}) {
    const json e = error_of(server_->exchange("GET /v1/models?q=" + std::string(n, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n"), 414);
    EXPECT_EQ(e["code"], "uri_too_long") << n;
  }
  // Large header fields (not the target) are still 431.
  const json e = error_of(
      server_->exchange("GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(20000, 'b') + "\r\n\r\n"), 431);
  EXPECT_EQ(e["code"], "headers_too_large");
}

TEST_F(Adversarial, HeadAnswersWhereGetDoesWithoutABody) {
  HttpClient c("127.0.0.1", server_->port());
  for (const char* path : {"/health", "/v1/models", "/v1/models/stories260K"}) {
    const HttpResponse get = c.get(path);
    const HttpResponse head = c.request("HEAD", path);
    EXPECT_EQ(head.status, 200) << path;
    EXPECT_EQ(head.header("content-length"), std::to_string(get.body.size())) << path;
    EXPECT_EQ(head.header("content-type"), get.header("content-type")) << path;
    EXPECT_TRUE(head.body.empty()) << path;
  }
  EXPECT_EQ(c.request("HEAD", "/metrics").status, 200);
  const HttpResponse post_only = c.request("HEAD", "/v1/completions");
  EXPECT_EQ(post_only.status, 405);
  EXPECT_EQ(post_only.header("allow"), "POST");
  EXPECT_EQ(c.get("/health").status, 200);  // the connection is still in step
  // The raw bytes: no body after the header.
  const std::string raw = server_->exchange("HEAD /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(status_of(raw), 200);
  EXPECT_EQ(body_of(raw), "");
}

TEST_F(Adversarial, OptionsWithoutCorsIs405WithAllow) {
  const std::string raw = server_->exchange(
      "OPTIONS /v1/chat/completions HTTP/1.1\r\nHost: x\r\nOrigin: https://app.example\r\n"
      "Access-Control-Request-Method: POST\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(error_of(raw, 405)["code"], "method_not_allowed");
  EXPECT_EQ(header_of(raw, "Allow"), "POST");
  EXPECT_EQ(header_of(raw, "Access-Control-Allow-Origin"), "");
}

TEST_F(Adversarial, WebSocketHandshakeErrorsAreJson) {
  struct Case {
    std::string headers;
    int status;
    std::string code;
  };
  const Case cases[] = {
      {kUpgrade + "Sec-WebSocket-Version: 13\r\n", 400, "invalid_websocket_handshake"},              // no key
      {kUpgrade + "Sec-WebSocket-Key: short\r\nSec-WebSocket-Version: 13\r\n", 400, "invalid_websocket_handshake"},
      {kUpgrade + kKey + "Sec-WebSocket-Version: 8\r\n", 426, "unsupported_websocket_version"},
      {kUpgrade + kKey, 400, "invalid_websocket_handshake"},                                          // no version
      {"GET /v1/realtime HTTP/1.1\r\nHost: x\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n" + kKey +
           "Sec-WebSocket-Version: 13\r\n", 400, "invalid_websocket_handshake"},                      // bad Upgrade
      {"GET /v1/realtime HTTP/1.1\r\nHost: x\r\n", 426, "upgrade_required"},
  };
  for (const Case& c : cases) {
    const std::string raw = server_->exchange(c.headers + "Connection-Close-Marker: 1\r\n\r\n");
    EXPECT_EQ(error_of(raw, c.status)["code"], c.code) << c.headers;
    if (c.code == "unsupported_websocket_version") EXPECT_EQ(header_of(raw, "Sec-WebSocket-Version"), "13");
    if (c.code == "upgrade_required") EXPECT_EQ(header_of(raw, "Upgrade"), "websocket");
  }
}

TEST_F(Adversarial, PostRealtimeIs405) {
  HttpClient c("127.0.0.1", server_->port());
  const HttpResponse r = c.post("/v1/realtime", "{}");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.header("allow"), "GET");
  EXPECT_EQ(json::parse(r.body)["error"]["code"], "method_not_allowed");
}

TEST_F(Adversarial, FrameLengthWithTheTopBitSetClosesWith1002AtOnce) {
  // The handshake, then a masked text frame header whose 64-bit length is 2^63.
  const std::string frame = std::string("\x81\xff", 2) + std::string("\x80\0\0\0\0\0\0\0", 8) + "mask";
  RawConnection c(server_->port());
  c.send(kUpgrade + kKey + "Sec-WebSocket-Version: 13\r\n\r\n");
  ASSERT_EQ(status_of(c.read_until("session.created")), 101);  // frames only after the 101 (RFC 6455 4.1)
  const auto t0 = std::chrono::steady_clock::now();
  c.send(frame);  // and no more: the server must not wait for 2^63 bytes
  const std::string raw = c.read_until_closed();
  const auto took = std::chrono::steady_clock::now() - t0;
  // The server's close frame: opcode 8, payload = code 1002 (big-endian) + reason.
  const std::string close_frame = std::string("\x88", 1);
  const size_t at = raw.rfind(close_frame);
  ASSERT_NE(at, std::string::npos) << "no close frame";
  ASSERT_GE(raw.size(), at + 4);
  const int code = (static_cast<unsigned char>(raw[at + 2]) << 8) | static_cast<unsigned char>(raw[at + 3]);
  EXPECT_EQ(code, 1002);
  EXPECT_LT(took, bound(std::chrono::milliseconds(1000))) << "the server waited for the frame";
}

TEST_F(Adversarial, OutOfRangeIntegersAre400NamingTheField) {
  HttpClient c("127.0.0.1", server_->port());
  for (const auto& [field, value] : std::vector<std::pair<std::string, std::string>>{
           {"seed", "1e30"}, {"seed", "18446744073709551616"}, {"top_k", "1e30"}}) {
    const HttpResponse r = c.post("/v1/completions", R"({"prompt":"x","max_tokens":1,")" + field + "\":" + value + "}");
    EXPECT_EQ(r.status, 400) << field << "=" << value << ": " << r.body;
    EXPECT_EQ(json::parse(r.body)["error"]["param"], field) << r.body;
  }
}

// The same server with CORS on: preflights answered, origins checked.
class AdversarialCors : public ProbeSuite<AdversarialCors> {
 public:
  static std::vector<std::string> server_flags() { return {"--cors-allow-origin", "https://app.example", "--cors-allow-origin", "http://localhost:3000"}; }
};

TEST_F(AdversarialCors, PreflightFromAnAllowedOriginIsAnswered) {
  HttpClient c("127.0.0.1", server_->port());
  const HttpResponse r = c.request("OPTIONS", "/v1/chat/completions", "",
                                   {{"Origin", "https://app.example"},
                                    {"Access-Control-Request-Method", "POST"},
                                    {"Access-Control-Request-Headers", "authorization, content-type"}});
  EXPECT_EQ(r.status, 204);
  EXPECT_EQ(r.header("access-control-allow-origin"), "https://app.example");
  EXPECT_EQ(r.header("access-control-allow-methods"), "POST, OPTIONS");
  EXPECT_EQ(r.header("access-control-allow-headers"), "authorization, content-type");
  EXPECT_EQ(r.header("access-control-max-age"), "600");
  EXPECT_EQ(r.header("vary"), "Origin");
  // Normal responses carry the origin too, errors included.
  const HttpResponse ok = c.request("POST", "/v1/completions", R"({"prompt":"x","max_tokens":1})",
                                    {{"Origin", "http://localhost:3000"}});
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.header("access-control-allow-origin"), "http://localhost:3000");
  const HttpResponse bad = c.request("POST", "/v1/completions", "{", {{"Origin", "https://app.example"}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.header("access-control-allow-origin"), "https://app.example");
  const HttpResponse stream = c.request("POST", "/v1/completions", R"({"prompt":"x","max_tokens":1,"stream":true})",
                                        {{"Origin", "https://app.example"}});
  EXPECT_EQ(stream.header("access-control-allow-origin"), "https://app.example");
}

TEST_F(AdversarialCors, OtherOriginsGetNoCorsHeaders) {
  HttpClient c("127.0.0.1", server_->port());
  const HttpResponse pre = c.request("OPTIONS", "/v1/models", "",
                                     {{"Origin", "https://evil.example"}, {"Access-Control-Request-Method", "GET"}});
  EXPECT_EQ(pre.status, 403);
  EXPECT_EQ(json::parse(pre.body)["error"]["code"], "cors_origin_not_allowed");
  EXPECT_EQ(pre.header("access-control-allow-origin"), "");
  const HttpResponse get = c.request("GET", "/health", "", {{"Origin", "https://evil.example"}});
  EXPECT_EQ(get.status, 200);
  EXPECT_EQ(get.header("access-control-allow-origin"), "");
  // OPTIONS without Origin: the path's methods.
  const HttpResponse plain = c.request("OPTIONS", "/health");
  EXPECT_EQ(plain.status, 204);
  EXPECT_EQ(plain.header("allow"), "GET, HEAD, OPTIONS");
  // A method the path lacks: 405, and Allow names OPTIONS now.
  const HttpResponse del = c.request("DELETE", "/health");
  EXPECT_EQ(del.status, 405);
  EXPECT_EQ(del.header("allow"), "GET, HEAD, OPTIONS");
}

TEST(AdversarialCorsAny, StarAllowsEveryOrigin) {
  NEXUS_REQUIRE_SHARED(model, "stories260K.gguf");
  ProbeServer server(model, {"--cors-allow-origin", "*"});
  ASSERT_TRUE(server.started());
  HttpClient c("127.0.0.1", server.port());
  const HttpResponse r = c.request("OPTIONS", "/v1/completions", "",
                                   {{"Origin", "https://anything.example"}, {"Access-Control-Request-Method", "POST"}});
  EXPECT_EQ(r.status, 204);
  EXPECT_EQ(r.header("access-control-allow-origin"), "*");
  EXPECT_EQ(c.request("GET", "/health", "", {{"Origin", "https://x.example"}}).header("access-control-allow-origin"),
            "*");
}
