// Identical greedy requests at once give identical answers (the prefix cache shares their prompt
// pages while they run), equal to the same request alone.
#include <gtest/gtest.h>

#include <thread>

#include "server_fixture.h"
#include "support/test_paths.h"

namespace oscar::testing {
namespace {

TEST(IdenticalRequests, ConcurrentGreedyAnswersAgree) {
  const size_t num_clients = kSanitized ? 8 : 32;
  const std::string prompt =
      "The pass key is 48213. Remember it. What is the pass key? The pass key is";
  TestServer server;
  const StreamedResponse alone = server.stream(prompt, 24);
  ASSERT_TRUE(alone.ok()) << alone.error;
  server.idle_snapshot();

  std::vector<StreamedResponse> answers(num_clients);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < num_clients; ++i) {
    clients.emplace_back([&, i] { answers[i] = server.stream(prompt, 24); });
  }
  for (std::thread& client : clients) client.join();
  for (size_t i = 0; i < num_clients; ++i) {
    EXPECT_TRUE(answers[i].ok()) << i << ": " << answers[i].error;
    EXPECT_EQ(answers[i].text, alone.text) << i;
  }
}

}  // namespace
}  // namespace oscar::testing
