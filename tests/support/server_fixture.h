// ServerFixture: an HttpServer on an ephemeral loopback port over a
// FakeBackend, for HTTP tests that need no model.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/http_server.h"
#include "support/fake_backend.h"
#include "support/http_client.h"

namespace nexus::test {

class ServerFixture : public ::testing::Test {
 protected:
  // Tests may adjust backend/options before calling start_server(); SetUp
  // starts a default one unless manual_start_ is set in the constructor.
  void SetUp() override {
    if (!manual_start_) start_server();
  }
  void TearDown() override {
    if (server) server->stop();
  }

  void start_server() {
    opts.host = "127.0.0.1";
    opts.port = 0;
    opts.log = [this](const std::string& line) {
      std::lock_guard lock(log_mu);
      log_lines.push_back(line);
    };
    server = std::make_unique<server::HttpServer>(*backend, opts);
    server->start();
  }

  std::unique_ptr<HttpClient> connect() { return std::make_unique<HttpClient>("127.0.0.1", server->port()); }

  static nlohmann::json parse(const std::string& s) { return nlohmann::json::parse(s); }

  // Asserts the OpenAI error shape; returns the "error" object.
  static nlohmann::json expect_error(const HttpResponse& r, int status) {
    EXPECT_EQ(r.status, status) << r.body;
    EXPECT_EQ(r.header("content-type"), "application/json");
    const auto j = nlohmann::json::parse(r.body, nullptr, false);
    EXPECT_TRUE(j.is_object() && j.contains("error")) << r.body;
    if (!j.is_object() || !j.contains("error")) return {};
    const auto& e = j["error"];
    EXPECT_TRUE(e["message"].is_string() && !e["message"].get<std::string>().empty());
    EXPECT_TRUE(e["type"].is_string());
    EXPECT_TRUE(e.contains("param") && (e["param"].is_null() || e["param"].is_string()));
    EXPECT_TRUE(e.contains("code") && (e["code"].is_null() || e["code"].is_string()));
    return e;
  }

  bool manual_start_ = false;
  std::unique_ptr<FakeBackend> backend = std::make_unique<FakeBackend>();
  server::HttpServerOptions opts;
  std::unique_ptr<server::HttpServer> server;
  std::mutex log_mu;
  std::vector<std::string> log_lines;
};

}  // namespace nexus::test
