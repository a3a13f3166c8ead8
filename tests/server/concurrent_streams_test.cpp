// Many clients streaming at once get, each, exactly the text they get when served alone: continuous
// batching over INT2 pages changes nothing a greedy client can see.
#include <gtest/gtest.h>

#include <thread>

#include "server_fixture.h"
#include "support/test_paths.h"

namespace oscar::testing {
namespace {

void expect_complete(const StreamedResponse& r, int64_t max_tokens, const std::string& label) {
  EXPECT_EQ(r.http_status, 200) << label << ": " << r.error << " after " << r.seconds << " s";
  EXPECT_TRUE(r.error.empty()) << label << ": " << r.error;
  EXPECT_TRUE(r.done) << label << ": the stream did not end with data: [DONE]";
  EXPECT_EQ(r.finish_reason, "length") << label;
  EXPECT_EQ(r.completion_tokens, max_tokens) << label;
}

TEST(ConcurrentStreams, EveryClientGetsWhatItGetsAlone) {
  const size_t num_clients = kSanitized ? 8 : 64;
  TestServer server;
  const std::vector<std::string> prompts = distinct_prompts(num_clients);
  auto max_tokens = [](size_t i) { return int64_t(8 + i % 9); };

  std::vector<StreamedResponse> alone;
  for (size_t i = 0; i < num_clients; ++i) {
    alone.push_back(server.stream(prompts[i], max_tokens(i)));
    expect_complete(alone.back(), max_tokens(i), "alone " + prompts[i]);
  }
  // Served alone, each prompt left its pages in the prefix cache; start the burst from a cold
  // cache so that every client prefills and decodes beside the others.
  server.idle_snapshot();

  std::vector<StreamedResponse> together(num_clients);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < num_clients; ++i) {
    clients.emplace_back([&, i] { together[i] = server.stream(prompts[i], max_tokens(i)); });
  }
  for (std::thread& client : clients) client.join();
  for (size_t i = 0; i < num_clients; ++i) {
    expect_complete(together[i], max_tokens(i), "together " + prompts[i]);
    EXPECT_EQ(together[i].text, alone[i].text) << prompts[i];
  }
}

}  // namespace
}  // namespace oscar::testing
