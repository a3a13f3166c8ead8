// A request whose work fails inside the engine loop gets an error response; the requests beside it
// get the answers they get alone, and the server goes on serving.
#include <gtest/gtest.h>

#include <thread>

#include "server_fixture.h"

namespace oscar::testing {
namespace {

constexpr int32_t kFailingToken = 7777;

TEST(FailingRequest, EndsWithAnErrorWhileTheOthersGoOn) {
  TestServerOptions options;
  options.failing_token = kFailingToken;
  TestServer server(options);
  const std::vector<std::string> prompts = distinct_prompts(3);
  std::vector<StreamedResponse> alone;
  for (const std::string& prompt : prompts) alone.push_back(server.stream(prompt, 16));

  // Streamed, beside the others, and answered whole.
  std::vector<StreamedResponse> together(prompts.size());
  nlohmann::json at_fault = greedy_body("", 16);
  at_fault["prompt"] = {1, 2, kFailingToken, 3};
  StreamedResponse failed_stream;
  std::vector<std::thread> clients;
  for (size_t i = 0; i < prompts.size(); ++i) {
    clients.emplace_back([&, i] { together[i] = server.stream(prompts[i], 16); });
  }
  clients.emplace_back(
      [&] { failed_stream = stream_completion(server.connection(), "/v1/completions", at_fault); });
  for (std::thread& client : clients) client.join();
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_TRUE(together[i].ok()) << prompts[i] << ": " << together[i].error;
    EXPECT_EQ(together[i].text, alone[i].text) << prompts[i];
  }
  EXPECT_FALSE(failed_stream.ok());
  EXPECT_NE(failed_stream.error.find("a step holds token 7777"), std::string::npos)
      << failed_stream.error;

  at_fault["stream"] = false;
  at_fault.erase("stream_options");
  const httplib::Result whole =
      server.client().Post("/v1/completions", at_fault.dump(), "application/json");
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole->status, 500);
  EXPECT_NE(whole->body.find("a step holds token 7777"), std::string::npos) << whole->body;

  const httplib::Result health = server.client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  const StreamedResponse after = server.stream(prompts[0], 16);
  ASSERT_TRUE(after.ok()) << after.error;
  EXPECT_EQ(after.text, alone[0].text);
  EXPECT_EQ(metric_value(server.metrics_text(), R"(oscar_requests_total{outcome="error"})"), 2);
  const EngineSnapshot idle = server.idle_snapshot();
  EXPECT_EQ(idle.full_pages_used, 0);
  EXPECT_EQ(idle.quantized_pages_used, 0);
}

// A backend that can run no more steps (a tensor-parallel rank died) fails the requests in flight
// and later ones with its error, and /health says so with 503, while the server stays up.
TEST(FailingRequest, DeadBackendFailsHealth) {
  TestServerOptions options;
  options.failing_token = kFailingToken;
  options.failing_token_is_fatal = true;
  TestServer server(options);
  ASSERT_EQ(server.client().Get("/health")->status, 200);
  nlohmann::json at_fault = greedy_body("", 4);
  at_fault["prompt"] = {1, 2, kFailingToken, 3};
  at_fault["stream"] = false;
  at_fault.erase("stream_options");
  const httplib::Result failed =
      server.client().Post("/v1/completions", at_fault.dump(), "application/json");
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->status, 500);
  const StreamedResponse after = server.stream(distinct_prompts(1)[0], 4);
  EXPECT_FALSE(after.ok());
  EXPECT_NE(after.error.find("the group ended"), std::string::npos) << after.error;
  const httplib::Result health = server.client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 503);
  EXPECT_NE(health->body.find("a step holds token 7777"), std::string::npos) << health->body;
}

}  // namespace
}  // namespace oscar::testing
