// The server's route table (server/routes.h): which route a target is, with
// and without /v1, the {id} routes, and what each one says of itself.
#include <gtest/gtest.h>

#include "server/api_router.h"
#include "server/core/protocol.h"
#include "server/routes.h"

using namespace nexus::server;

namespace {

RouteId id_of(std::string_view target) {
  const Route* r = find_route(target);
  EXPECT_NE(r, nullptr) << target;
  return r ? r->id : RouteId::Health;
}

}  // namespace

TEST(ServerRoutes, V1RoutesAnswerWithAndWithoutTheirPrefixOthersOnlyAsWritten) {
  EXPECT_EQ(id_of("/v1/chat/completions"), RouteId::ChatCompletions);
  EXPECT_EQ(id_of("/chat/completions?x=1"), RouteId::ChatCompletions);
  EXPECT_EQ(id_of("/v1/messages/count_tokens"), RouteId::CountTokens);
  EXPECT_EQ(id_of("/tokenize"), RouteId::Tokenize);
  EXPECT_EQ(find_route("/v1/tokenize"), nullptr);
  EXPECT_EQ(id_of("/health"), RouteId::Health);
  EXPECT_EQ(find_route("/v1/health"), nullptr);
  EXPECT_EQ(find_route("/v1/nope"), nullptr);
  EXPECT_EQ(find_route("/v1"), nullptr);
}

TEST(ServerRoutes, IdRoutesMatchTheirSuffixFirst) {
  EXPECT_EQ(id_of("/v1/responses/resp_1/cancel"), RouteId::ResponseCancel);
  EXPECT_EQ(id_of("/v1/responses/resp_1/input_items?limit=2"), RouteId::ResponseInputItems);
  EXPECT_EQ(id_of("/v1/responses/resp_1"), RouteId::StoredResponse);
  EXPECT_EQ(find_route("/v1/responses/"), nullptr);  // no id
  EXPECT_EQ(id_of("/v1/models/org/model-a"), RouteId::Model);  // an id may hold '/'
  EXPECT_EQ(id_of("/v1/models"), RouteId::Models);
}

TEST(ServerRoutes, EachConsumerReadsTheSameTable) {
  EXPECT_STREQ(ApiRouter::allowed_methods("/v1/responses/r/input_items"), "GET, HEAD");
  EXPECT_STREQ(ApiRouter::allowed_methods("/v1/responses/r"), "GET, HEAD, DELETE");
  EXPECT_EQ(ApiRouter::allowed_methods("/v1/unknown"), nullptr);
  EXPECT_EQ(protocol_of("/v1/messages?beta=true"), Protocol::Anthropic);
  EXPECT_EQ(protocol_of("/messages/count_tokens"), Protocol::Anthropic);
  EXPECT_EQ(protocol_of("/v1/responses"), Protocol::OpenAI);
  EXPECT_EQ(protocol_of("/elsewhere"), Protocol::OpenAI);
  EXPECT_TRUE(find_route("/metrics")->open);
  EXPECT_FALSE(find_route("/v1/models")->open);
  EXPECT_TRUE(find_route("/v1/realtime")->websocket);
  EXPECT_TRUE(find_route("/responses")->websocket);
  for (const char* g : {"/v1/completions", "/v1/chat/completions", "/v1/responses", "/v1/messages"})
    EXPECT_TRUE(find_route(g)->generation) << g;
  EXPECT_FALSE(find_route("/v1/messages/count_tokens")->generation);
}
