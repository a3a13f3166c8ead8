// `oscar serve` as a user starts it: on loopback unless told otherwise, serving until SIGTERM,
// then exiting cleanly; on the CPU with a modest KV pool whose pages are touched only when used.
#include <gtest/gtest.h>

#include <httplib.h>

#include <fstream>
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

// Resident memory of a process in bytes (VmRSS in /proc/PID/status); -1 when unreadable.
int64_t resident_bytes(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;  // "VmRSS: N kB"
  }
  return -1;
}

// The pool size the start-up line reports, in GiB; -1 when absent.
double pool_gib(const std::string& line) {
  std::smatch m;
  return std::regex_search(line, m, std::regex(R"(pool ([0-9.]+) GiB)")) ? std::stod(m[1]) : -1;
}

// The server answers, serves a request and still holds less than a third of its pool in memory.
void expect_pool_untouched(BackgroundOscar& serve, const std::string& line, double pool) {
  std::smatch m;
  ASSERT_TRUE(std::regex_search(line, m, std::regex(R"(on http://127\.0\.0\.1:([0-9]+))"))) << line;
  httplib::Client client("127.0.0.1", std::stoi(m[1]));
  client.set_read_timeout(60, 0);
  const httplib::Result health = client.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  const httplib::Result completion = client.Post(
      "/v1/completions", R"({"prompt": "The quick brown fox", "max_tokens": 4, "temperature": 0})",
      "application/json");
  ASSERT_TRUE(completion);
  EXPECT_EQ(completion->status, 200) << completion->body;
  const int64_t resident = resident_bytes(serve.pid());
  ASSERT_GT(resident, 0);
  EXPECT_LT(double(resident), pool / 3 * double(1 << 30)) << "pool " << pool << " GiB";
}

TEST(ServeCommand, CpuPoolIsModestAndItsPagesAreTouchedOnlyWhenUsed) {
  // Sized from the machine's memory, the pool took half of it; vLLM's CPU backend takes 4 GiB.
  BackgroundOscar by_default("serve --device cpu --port 0");
  const std::string line = by_default.wait_for_stderr_line("serving", std::chrono::seconds(60));
  ASSERT_FALSE(line.empty()) << by_default.stderr_text();
  EXPECT_GT(pool_gib(line), 0.0) << line;
  EXPECT_LE(pool_gib(line), 4.0) << line;
  EXPECT_EQ(by_default.terminate(std::chrono::seconds(30)), 0) << by_default.stderr_text();

  // --kv-pool-gb sets it; a pool of 3 GiB stays out of resident memory until its pages are used.
  BackgroundOscar sized("serve --device cpu --port 0 --kv-pool-gb 3");
  const std::string sized_line = sized.wait_for_stderr_line("serving", std::chrono::seconds(60));
  ASSERT_FALSE(sized_line.empty()) << sized.stderr_text();
  EXPECT_NEAR(pool_gib(sized_line), 3.0, 0.01) << sized_line;
  expect_pool_untouched(sized, sized_line, 3.0);
  EXPECT_EQ(sized.terminate(std::chrono::seconds(30)), 0) << sized.stderr_text();
}

}  // namespace
}  // namespace oscar::testing
