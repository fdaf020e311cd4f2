// EngineServer: the real HttpServer over a real Engine on a shared model,
// in process, on an ephemeral loopback port (skips, or fails under CI, when
// the model file is missing).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "server/backend.h"
#include "server/http_server.h"
#include "support/http_client.h"
#include "support/loaded_model.h"
#include "support/test_support.h"

namespace nexus::test {

class EngineServer : public ::testing::Test {
 protected:
  // The model under ../shared/models and the engine's options; call from SetUp.
  void start(const std::string& model, EngineOptions eo) {
    const std::string path = shared_model_path(model);
    if (!require_file(path)) {
      if (HasFailure()) return;
      GTEST_SKIP() << "missing shared file " << path << " (set CI=true to fail instead)";
    }
    m_ = &loaded_model(path);
    engine_ = std::make_unique<Engine>(m_->model, *m_->tok, eo);
    backend_ = std::make_unique<server::EngineBackend>(*engine_, "test-model", server::ChatTemplate());
    server::HttpServerOptions o;
    o.port = 0;
    server_ = std::make_unique<server::HttpServer>(*backend_, o);
    server_->start();
  }
  void TearDown() override {
    if (server_) server_->stop();
  }

  HttpResponse post_raw(const std::string& path, const nlohmann::json& body) {
    HttpClient c("127.0.0.1", server_->port());
    return c.post(path, body.dump());
  }
  // POSTs and expects 200; the parsed body.
  nlohmann::json post(const std::string& path, const nlohmann::json& body) {
    const HttpResponse r = post_raw(path, body);
    EXPECT_EQ(r.status, 200) << r.body;
    return nlohmann::json::parse(r.body, nullptr, false);
  }

  LoadedModel* m_ = nullptr;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<server::EngineBackend> backend_;
  std::unique_ptr<server::HttpServer> server_;
};

}  // namespace nexus::test
