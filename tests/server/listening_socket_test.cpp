// The server listens on loopback unless told otherwise (an API that spends compute must not be
// reachable from the network by accident), and alone on its port.
#include <gtest/gtest.h>

#include "server_fixture.h"
#include "support/listening_sockets.h"
#include "util/error.h"

namespace oscar::testing {
namespace {

TEST(ListeningSocket, DefaultHostIsLoopback) {
  EXPECT_EQ(HttpServerOptions{}.host, "127.0.0.1");
}

TEST(ListeningSocket, TheListeningSocketIsBoundToLoopbackOnly) {
  TestServer server;  // default host
  const std::vector<std::string> addresses = listening_addresses(server.port());
  ASSERT_EQ(addresses.size(), 1u);
  EXPECT_EQ(addresses[0], "127.0.0.1");
  EXPECT_EQ(server.client().Get("/health")->status, 200);
}

// A second server on a port in use is an error, not a silent co-owner of the port that the
// kernel would hand half the connections.
TEST(ListeningSocket, APortInUseIsAnError) {
  TestServer first;
  TestServerOptions options;
  options.port = first.port();
  EXPECT_THROW(TestServer second(options), Error);
  EXPECT_EQ(listening_addresses(first.port()).size(), 1u);
  EXPECT_EQ(first.client().Get("/health")->status, 200);
}

}  // namespace
}  // namespace oscar::testing
