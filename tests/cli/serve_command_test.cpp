// `oscar serve` as a user starts it: on loopback unless told otherwise, serving until SIGTERM,
// then exiting cleanly.
#include <gtest/gtest.h>

#include <httplib.h>

#include <regex>

#include "oscar_command.h"
#include "support/listening_sockets.h"

namespace oscar::testing {
namespace {

TEST(ServeCommand, ListensOnLoopbackByDefaultAndStopsOnSigterm) {
  BackgroundOscar serve("serve --device cpu --port 0 --kv-pool-gb 0.02");
  const std::string line = serve.wait_for_stderr_line("serving", std::chrono::seconds(60));
  ASSERT_FALSE(line.empty()) << serve.stderr_text();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(line, m, std::regex(R"(on http://([0-9.]+):([0-9]+))"))) << line;
  EXPECT_EQ(m[1], "127.0.0.1");
  const int port = std::stoi(m[2]);
  EXPECT_EQ(listening_addresses(port), std::vector<std::string>{"127.0.0.1"});
  httplib::Client client("127.0.0.1", port);
  const httplib::Result health = client.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(serve.terminate(std::chrono::seconds(30)), 0) << serve.stderr_text();
}

}  // namespace
}  // namespace oscar::testing
