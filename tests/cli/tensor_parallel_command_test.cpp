// `oscar generate -tp N` on the CPU backend: oscar starts the other ranks as processes of its
// own, and the greedy continuation equals one rank's, also with the ranks on two nodes
// (--nnodes 2, each node a process started by the test); a rank killed mid-generation or a node
// whose peers never come ends the command with an error naming the rank, not a hang.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <thread>

#include "oscar_command.h"
#include "support/listening_sockets.h"

namespace oscar {
namespace {

using testing::BackgroundOscar;
using testing::CommandResult;
using testing::run_oscar;

// A greedy continuation on the testbed, its INT2 cache past the sink and the recent window.
const char* const kGreedyArgs =
    "generate --device cpu --threads 1 --prompt \"int main(void) {\" --max-tokens 8 "
    "--temperature 0 --kv-cache-dtype int2 --kv-method quarot --kv-sink-tokens 4 "
    "--kv-recent-tokens 8";

TEST(TensorParallelCommand, RanksAsProcessesGiveTheSameContinuation) {
  const std::string args = kGreedyArgs;
  const CommandResult one = run_oscar(args);
  ASSERT_EQ(one.exit_code, 0) << one.stderr_text;
  for (const char* tp : {"-tp 2", "--tensor-parallel-size 4"}) {
    const CommandResult split = run_oscar(args + " " + tp);
    ASSERT_EQ(split.exit_code, 0) << split.stderr_text;
    EXPECT_EQ(split.stdout_text, one.stdout_text) << tp;
    EXPECT_NE(split.stderr_text.find("ranks as processes"), std::string::npos) << split.stderr_text;
  }
}

// Two nodes on one host: node 1 is a process of its own, started first (its ranks wait for rank 0
// to listen). At tp 4 each node's process starts one follower of its own (ranks 1 and 3).
TEST(TensorParallelCommand, TwoNodesGiveTheSameContinuation) {
  const std::string args = kGreedyArgs;
  const CommandResult one = run_oscar(args);
  ASSERT_EQ(one.exit_code, 0) << one.stderr_text;
  for (const int tp : {2, 4}) {
    const std::string job =
        fmt::format("{} -tp {} --nnodes 2 --dist-init-addr 127.0.0.1:{} --dist-timeout 30", args,
                    tp, testing::free_local_port());
    BackgroundOscar node1(job + " --node-rank 1");
    const CommandResult node0 = run_oscar(job + " --node-rank 0");
    ASSERT_EQ(node0.exit_code, 0) << node0.stderr_text << node1.stderr_text();
    EXPECT_EQ(node0.stdout_text, one.stdout_text) << "tp " << tp;
    EXPECT_NE(node0.stderr_text.find(fmt::format("rank 0 of {}, {} ranks as processes", tp, tp)),
              std::string::npos)
        << node0.stderr_text;
    // Node 1's ranks follow rank 0's steps and end when it shuts the job down.
    EXPECT_EQ(node1.wait_for_exit(std::chrono::seconds(30)), 0) << node1.stderr_text();
  }
}

// A node whose peers never come ends with an error naming the ranks, within --dist-timeout.
TEST(TensorParallelCommand, NodeWithoutItsPeersEndsAtTheTimeout) {
  const int port = testing::free_local_port();
  const std::string job = fmt::format(
      "generate --device cpu --threads 1 --prompt hi --max-tokens 2 -tp 4 --nnodes 2 "
      "--dist-init-addr 127.0.0.1:{} --dist-timeout 1",
      port);
  auto started = std::chrono::steady_clock::now();
  const CommandResult node1 = run_oscar(job + " --node-rank 1");  // node 0 never comes
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(15));
  EXPECT_EQ(node1.exit_code, 1);
  for (const int rank : {2, 3}) {  // node 1's process and the follower it started
    EXPECT_NE(node1.stderr_text.find(fmt::format(
                  "rank {} (node 1) waiting up to 1000 ms for rank 0 at 127.0.0.1:{}", rank, port)),
              std::string::npos)
        << node1.stderr_text;
  }
  started = std::chrono::steady_clock::now();
  const CommandResult node0 = run_oscar(job + " --node-rank 0");  // node 1 never comes
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(15));
  EXPECT_EQ(node0.exit_code, 1);
  EXPECT_NE(node0.stderr_text.find("waited 1000 ms for rank(s) 2, 3 of 4"), std::string::npos)
      << node0.stderr_text;
}

TEST(TensorParallelCommand, SplitsThatDoNotFitAndBenchesOnSeveralNodesAreRefused) {
  const CommandResult three = run_oscar("generate --device cpu -tp 3 --prompt hi");
  EXPECT_EQ(three.exit_code, 1);
  EXPECT_NE(three.stderr_text.find("does not divide the model's num_attention_heads (8)"),
            std::string::npos)
      << three.stderr_text;
  // Checked before any GPU is looked for: the split of the --model shape.
  for (const char* bench : {"decode-step", "prefill"}) {
    const CommandResult split =
        run_oscar(fmt::format("bench {} --model llama-3.1-70b -tp 3", bench));
    EXPECT_EQ(split.exit_code, 1);
    EXPECT_NE(split.stderr_text.find("does not divide the model's num_attention_heads (64)"),
              std::string::npos)
        << bench << ": " << split.stderr_text;
    // The benches run their ranks as threads of one process.
    const CommandResult two_nodes =
        run_oscar(fmt::format("bench {} --model llama-3.1-70b -tp 4 --nnodes 2 --dist-init-addr "
                              "127.0.0.1:1",
                              bench));
    EXPECT_EQ(two_nodes.exit_code, 1);
    EXPECT_NE(two_nodes.stderr_text.find("--nnodes 2: the benches run their ranks as threads"),
              std::string::npos)
        << bench << ": " << two_nodes.stderr_text;
  }
}

// The pids of `pid`'s children (Linux's /proc/<pid>/task/<pid>/children).
std::vector<int> children_of(int pid) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  std::vector<int> pids;
  int child = 0;
  while (file >> child) pids.push_back(child);
  return pids;
}

TEST(TensorParallelCommand, KilledRankEndsTheCommand) {
  BackgroundOscar oscar(
      "generate --device cpu --threads 1 -tp 2 --dist-timeout 20 --prompt \"The quick brown "
      "fox\" --max-tokens 2000 --temperature 0");
  std::vector<int> followers;
  for (int i = 0; i < 500 && followers.empty(); ++i) {
    followers = children_of(oscar.pid());
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(followers.size(), 1u);
  std::this_thread::sleep_for(std::chrono::seconds(3));  // past the bootstrap, into the steps
  ::kill(followers[0], SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  const std::string error = oscar.wait_for_stderr_line("oscar: error", std::chrono::seconds(60));
  EXPECT_LT(std::chrono::steady_clock::now() - killed, std::chrono::seconds(25));
  EXPECT_NE(error.find("rank 1"), std::string::npos) << oscar.stderr_text();
}

}  // namespace
}  // namespace oscar
