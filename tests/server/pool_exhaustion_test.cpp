// A KV pool too small for all requests at once, but large enough for each alone: requests wait or
// are preempted and recomputed, and every one completes with the answer it gets alone.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "server_fixture.h"
#include "support/test_paths.h"

namespace oscar::testing {
namespace {

TEST(PoolExhaustion, EveryRequestCompletesWithItsAloneAnswer) {
  const size_t num_clients = kSanitized ? 4 : 8;
  const int64_t max_tokens = 60;
  TestServerOptions options;
  // About 70 tokens a request (sink 8, window 24, page 16, prefill chunk 64): each needs up to 8
  // full-precision and 3 quantized pages, so these pools hold two or three requests at a time.
  options.capacity = {14, 12};
  TestServer server(options);
  const std::vector<std::string> prompts = distinct_prompts(num_clients);

  std::vector<StreamedResponse> alone;
  for (const std::string& prompt : prompts) {
    alone.push_back(server.stream(prompt, max_tokens));
    ASSERT_TRUE(alone.back().ok()) << prompt << ": " << alone.back().error;
  }
  server.idle_snapshot();

  std::vector<StreamedResponse> together(num_clients);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < num_clients; ++i) {
    clients.emplace_back([&, i] { together[i] = server.stream(prompts[i], max_tokens); });
  }
  for (std::thread& client : clients) client.join();
  for (size_t i = 0; i < num_clients; ++i) {
    EXPECT_TRUE(together[i].ok()) << prompts[i] << ": " << together[i].error;
    EXPECT_EQ(together[i].text, alone[i].text) << prompts[i];
  }
  const EngineSnapshot after = server.idle_snapshot();
  EXPECT_GT(after.preemptions, 0) << "the pool was never short";
  EXPECT_EQ(after.full_pages_free, 14);
  EXPECT_EQ(after.quantized_pages_free, 12);
}

// The choices of one request are admitted together: where the pool can never hold one of them, the
// request is refused whole (400), and the choices already admitted are cancelled, their pages free.
TEST(PoolExhaustion, ARequestWithAChoiceThePoolCannotHoldIsRefusedWhole) {
  TestServerOptions options;
  options.capacity = {14, 12};
  TestServer server(options);
  std::string long_prompt;
  for (int i = 0; i < 80; ++i) long_prompt += "word ";
  nlohmann::json body = greedy_body("", 100);
  body["stream"] = false;
  body.erase("stream_options");
  body["prompt"] = {"The quick brown fox",
                    long_prompt + long_prompt + long_prompt + long_prompt + long_prompt};
  const httplib::Result result =
      server.client().Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 400) << result->body;
  EXPECT_NE(result->body.find("pool"), std::string::npos) << result->body;
  // The refusal can answer before the loop has run the admitted choice's cancellation: its pages
  // come back at the loop's next step.
  EngineSnapshot after = server.idle_snapshot();
  for (int wait = 0;
       wait < 100 && (after.full_pages_free != 14 || after.quantized_pages_free != 12); ++wait) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    after = server.idle_snapshot();
  }
  EXPECT_EQ(after.full_pages_free, 14);
  EXPECT_EQ(after.quantized_pages_free, 12);
  EXPECT_LT(after.generated_tokens, 100);
  const StreamedResponse next = server.stream("The quick brown fox", 8);
  EXPECT_TRUE(next.ok()) << next.error;
}

}  // namespace
}  // namespace oscar::testing
