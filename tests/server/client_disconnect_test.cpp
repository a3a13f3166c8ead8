// A client that hangs up mid-stream cancels its request: its pages return to the pool, the
// request counts as cancelled, and the server goes on serving.
#include <gtest/gtest.h>

#include <thread>

#include "server_fixture.h"

namespace oscar::testing {
namespace {

TEST(ClientDisconnect, HangingUpMidStreamFreesThePages) {
  TestServer server;
  const EngineSnapshot baseline = server.idle_snapshot();
  ASSERT_EQ(baseline.full_pages_used, 0);
  ASSERT_EQ(baseline.quantized_pages_used, 0);

  // Four clients hang up after three chunks of a long answer, while a fifth reads to the end.
  std::vector<StreamedResponse> hung_up(4);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < hung_up.size(); ++i) {
    clients.emplace_back([&, i] {
      int chunks = 0;
      hung_up[i] = server.stream("Debian packages are built from " + std::to_string(i), 400,
                                 [&](const nlohmann::json&) { return ++chunks < 3; });
    });
  }
  const StreamedResponse full = server.stream("The quick brown fox", 32);
  for (std::thread& client : clients) client.join();
  for (const StreamedResponse& r : hung_up) {
    EXPECT_TRUE(r.hung_up);
    EXPECT_FALSE(r.done);
  }
  EXPECT_TRUE(full.ok()) << full.error;

  const EngineSnapshot after = server.idle_snapshot();
  EXPECT_EQ(after.full_pages_free, baseline.full_pages_free);
  EXPECT_EQ(after.quantized_pages_free, baseline.quantized_pages_free);
  // Cancelled long before 400 tokens: the hang-up reached the engine.
  EXPECT_LT(after.generated_tokens, 4 * 400);
  EXPECT_EQ(metric_value(server.metrics_text(), "oscar_requests_total{outcome=\"cancelled\"}"),
            4.0);

  const StreamedResponse next = server.stream("int main(void) {", 8);
  EXPECT_TRUE(next.ok()) << next.error;
}

// A request of several prompts cancels every one of its choices when its client hangs up.
TEST(ClientDisconnect, HangingUpCancelsEveryChoice) {
  TestServer server;
  const EngineSnapshot baseline = server.idle_snapshot();
  nlohmann::json body = greedy_body("", 400);
  body["prompt"] = {"Debian packages are built from", "The quick brown fox", "int main(void) {"};
  int chunks = 0;
  const StreamedResponse hung_up =
      stream_completion(server.connection(), "/v1/completions", body,
                        [&](const nlohmann::json&) { return ++chunks < 4; });
  EXPECT_TRUE(hung_up.hung_up);
  const EngineSnapshot after = server.idle_snapshot();
  EXPECT_EQ(after.full_pages_free, baseline.full_pages_free);
  EXPECT_EQ(after.quantized_pages_free, baseline.quantized_pages_free);
  EXPECT_LT(after.generated_tokens, 3 * 400);
  EXPECT_EQ(metric_value(server.metrics_text(), "oscar_requests_total{outcome=\"cancelled\"}"),
            3.0);
}

}  // namespace
}  // namespace oscar::testing
