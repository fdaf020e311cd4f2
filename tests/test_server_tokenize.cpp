// POST /tokenize and /detokenize (server/tokenize_endpoints.h) over the
// real tokenizer (stories260K), on loopback.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/engine_server.h"

using namespace nexus;
using namespace nexus::test;
using nlohmann::json;

namespace {

class ServerTokenize : public EngineServer {
 protected:
  void SetUp() override {
    EngineOptions eo;
    eo.n_threads = 1;
    eo.n_ctx = 256;
    start("stories260K.gguf", eo);
  }
};

std::string bytes_of(const json& piece) {
  if (piece.is_string()) return piece.get<std::string>();
  std::string out;
  for (const json& b : piece) out += static_cast<char>(b.get<int>());
  return out;
}

}  // namespace

TEST_F(ServerTokenize, TokensAsTheTokenizerEncodesThem) {
  const std::string text = "Once upon a time";
  const json plain = post("/tokenize", {{"content", text}});
  EXPECT_EQ(plain["tokens"].get<std::vector<int32_t>>(), m_->tok->encode(text, false, true));
  const json special = post("/tokenize", {{"content", text}, {"add_special", true}});
  EXPECT_EQ(special["tokens"].get<std::vector<int32_t>>(), m_->tok->encode(text, m_->tok->add_bos_default(), true));
  if (m_->tok->add_bos_default()) EXPECT_EQ(special["tokens"][0], m_->tok->bos_id());
  // parse_special false: "<s>" written in the text is text, not BOS.
  const json literal = post("/tokenize", {{"content", "<s>"}, {"parse_special", false}});
  EXPECT_EQ(literal["tokens"].get<std::vector<int32_t>>(), m_->tok->encode("<s>", false, false));
  const json parsed = post("/tokenize", {{"content", "<s>"}});
  EXPECT_EQ(parsed["tokens"], json::array({m_->tok->bos_id()}));
}

TEST_F(ServerTokenize, PiecesAreTextOrBytesAndDetokenizeRoundTrips) {
  const std::string text = "A smile \xF0\x9F\x99\x82 and a tree";
  const json j = post("/tokenize", {{"content", text}, {"with_pieces", true}});
  std::string joined;
  bool any_bytes = false;
  std::vector<int32_t> ids;
  for (const json& t : j["tokens"]) {
    ids.push_back(t["id"].get<int32_t>());
    EXPECT_EQ(bytes_of(t["piece"]), m_->tok->token_to_piece(ids.back(), true));
    any_bytes = any_bytes || t["piece"].is_array();
    joined += bytes_of(t["piece"]);
  }
  EXPECT_TRUE(any_bytes) << j.dump();  // the emoji is byte-fallback tokens in a 512-token vocabulary
  EXPECT_EQ(m_->tok->decode(ids), text);
  const json back = post("/detokenize", {{"tokens", ids}});
  EXPECT_EQ(back["content"], text);
  EXPECT_EQ(post("/detokenize", {{"tokens", json::array()}})["content"], "");
}

TEST_F(ServerTokenize, BadInputNamesTheField) {
  const struct {
    const char* path;
    json body;
    const char* param;
  } cases[] = {
      {"/tokenize", json::object(), "content"},
      {"/tokenize", {{"content", 5}}, "content"},
      {"/tokenize", {{"content", "x"}, {"with_pieces", "yes"}}, "with_pieces"},
      {"/detokenize", json::object(), "tokens"},
      {"/detokenize", {{"tokens", "abc"}}, "tokens"},
      {"/detokenize", {{"tokens", {1, 999999}}}, "tokens"},
      {"/detokenize", {{"tokens", {-1}}}, "tokens"},
      {"/detokenize", {{"tokens", {1.5}}}, "tokens"},
  };
  for (const auto& c : cases) {
    const HttpResponse r = post_raw(c.path, c.body);
    EXPECT_EQ(r.status, 400) << c.body.dump();
    EXPECT_EQ(json::parse(r.body, nullptr, false)["error"]["param"], c.param) << r.body;
  }
  HttpClient cl("127.0.0.1", server_->port());
  EXPECT_EQ(cl.get("/tokenize").status, 405);
  EXPECT_EQ(cl.post("/tokenize", "{").status, 400);
}
