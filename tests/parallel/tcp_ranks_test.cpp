// The TCP bootstrap and rank protocol with ranks as local processes: every rank receives rank
// 0's unique id, rank table and step plans, and their collectives meet; a killed rank, a rank
// that never comes, a missing rank 0 and a rank of another job end every rank with an Error
// that names the rank at fault, well before the test's limit (never a hang).
#include <gtest/gtest.h>

#include <csignal>

#include "parallel/rank_protocol.h"
#include "parallel/tcp_communicator.h"
#include "rank_processes.h"
#include "support/listening_sockets.h"
#include "util/error.h"

namespace oscar {
namespace {

using testing::finish_rank;
using testing::RankOutcome;
using testing::RankProcess;
using testing::start_rank;

UniqueId test_unique_id() {
  UniqueId id;
  for (size_t i = 0; i < id.size(); ++i) id[i] = std::byte(i * 7 + 3);
  return id;
}

// A plan whose every field depends on the step, so a plan out of order or mangled shows.
StepPlan plan_of_step(int64_t step) {
  StepPlan plan;
  plan.step_index = step;
  for (int64_t s = 0; s <= step % 3; ++s) {
    PlannedSequence sequence;
    for (int64_t t = 0; t < 1 + 5 * s; ++t) sequence.tokens.push_back(int32_t(100 * step + t));
    for (int32_t p = 0; p < 3; ++p) {
      sequence.pages.push_back({int32_t(step + p), p == 2 ? -1 : int32_t(s + p), int32_t(p - 1)});
    }
    sequence.cached_tokens = 17 * step + s;
    sequence.full_precision_until = s;
    sequence.all_logits = s % 2 == 1;
    plan.sequences.push_back(sequence);
  }
  return plan;
}

DistributedOptions job(int port, int tp, int nnodes, int node_rank,
                       std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  DistributedOptions options;
  options.init_address = {"127.0.0.1", port};
  options.tensor_parallel_size = tp;
  options.nnodes = nnodes;
  options.node_rank = node_rank;
  options.timeout = timeout;
  return options;
}

// The body of one rank running `steps` plans: a sum over the ranks each step, and (on
// `kill_rank`) death by SIGKILL when step `kill_step` arrives.
void run_rank(const DistributedOptions& options, int local_rank, int steps, int kill_rank = -1,
              int kill_step = -1) {
  const UniqueId id = test_unique_id();
  RankLinks links = bootstrap_ranks(options, local_rank, &id);
  require(links.unique_id == id, "rank {}: another unique id", links.rank);
  for (int r = 0; r < links.world_size; ++r) {
    require(links.ranks[size_t(r)].rank == r, "rank {}: table entry {} names rank {}", links.rank,
            r, links.ranks[size_t(r)].rank);
    require(links.ranks[size_t(r)].node_rank == r / (links.world_size / options.nnodes),
            "rank {}: rank {} on node {}", links.rank, r, links.ranks[size_t(r)].node_rank);
  }
  TcpCommunicator communicator(links);
  const float expected_sum = float(links.world_size * (links.world_size + 1) / 2);
  auto collective = [&](int64_t step) {
    std::vector<float> values = {float(links.rank + 1), float(step)};
    communicator.all_reduce_sum(values);
    require(values[0] == expected_sum && values[1] == float(step * links.world_size),
            "rank {}: step {} summed to {} and {}", links.rank, step, values[0], values[1]);
  };
  if (links.rank == 0) {
    StepLeader leader(links);
    try {
      for (int64_t step = 0; step < steps; ++step) {
        leader.send_step(plan_of_step(step));
        collective(step);
        leader.wait_step_done(step);
      }
      leader.shutdown();
    } catch (const Error& e) {
      leader.report_failure(e.what());
      throw;
    }
    return;
  }
  StepFollower follower(links);
  int64_t step = 0;
  while (const std::optional<StepPlan> plan = follower.next_step()) {
    require(*plan == plan_of_step(step), "rank {}: step {} arrived changed", links.rank, step);
    if (links.rank == kill_rank && step == kill_step) std::raise(SIGKILL);
    collective(step);
    follower.step_done(step);
    ++step;
  }
  require(step == steps, "rank {}: shut down after {} of {} steps", links.rank, step, steps);
}

std::vector<RankOutcome> finish_all(const std::vector<RankProcess>& ranks, int limit_seconds) {
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(limit_seconds);
  std::vector<RankOutcome> outcomes;
  for (const RankProcess& rank : ranks) {
    outcomes.push_back(finish_rank(rank, limit));
    if (!outcomes.back().message.empty()) std::printf("%s\n", outcomes.back().message.c_str());
  }
  return outcomes;
}

TEST(TcpRanks, BootstrapStepsAndCollectivesReachEveryRank) {
  // 4 ranks on 2 "nodes" of 2, started in an order that has followers wait for rank 0.
  const int port = testing::free_local_port();
  std::vector<RankProcess> ranks;
  for (const auto& [node, local] : {std::pair{1, 1}, {0, 1}, {1, 0}, {0, 0}}) {
    ranks.push_back(start_rank([=] { run_rank(job(port, 4, 2, node), local, 6); }));
  }
  const auto outcomes = finish_all(ranks, 30);
  for (const RankOutcome& outcome : outcomes) {
    EXPECT_FALSE(outcome.hung);
    EXPECT_EQ(outcome.exit_code, 0) << outcome.message;
  }
}

TEST(TcpRanks, KilledRankEndsEveryRank) {
  const int port = testing::free_local_port();
  std::vector<RankProcess> ranks;
  for (int rank = 0; rank < 3; ++rank) {
    ranks.push_back(start_rank([=] { run_rank(job(port, 3, 1, 0), rank, 6, 2, 2); }));
  }
  const auto start = std::chrono::steady_clock::now();
  const auto outcomes = finish_all(ranks, 30);
  // The ranks notice the closed connection, not the 20 s timeout.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(outcomes[2].signal, SIGKILL);
  EXPECT_EQ(outcomes[0].exit_code, 1);
  EXPECT_NE(outcomes[0].message.find("rank 2"), std::string::npos) << outcomes[0].message;
  EXPECT_NE(outcomes[0].message.find("closed the connection"), std::string::npos)
      << outcomes[0].message;
  EXPECT_EQ(outcomes[1].exit_code, 1);
  EXPECT_NE(outcomes[1].message.find("rank 0"), std::string::npos) << outcomes[1].message;
  for (const RankOutcome& outcome : outcomes) EXPECT_FALSE(outcome.hung);
}

TEST(TcpRanks, MissingRankTimesOutTheBootstrap) {
  const int port = testing::free_local_port();
  const auto timeout = std::chrono::milliseconds(500);
  std::vector<RankProcess> ranks;
  for (int rank = 0; rank < 2; ++rank) {  // rank 2 of 3 never starts
    ranks.push_back(start_rank([=] { run_rank(job(port, 3, 1, 0, timeout), rank, 1); }));
  }
  const auto outcomes = finish_all(ranks, 20);
  EXPECT_EQ(outcomes[0].exit_code, 1);
  EXPECT_NE(outcomes[0].message.find("waited 500 ms for rank(s) 2 of 3"), std::string::npos)
      << outcomes[0].message;
  EXPECT_EQ(outcomes[1].exit_code, 1);
  EXPECT_NE(outcomes[1].message.find("rank 0"), std::string::npos) << outcomes[1].message;
  for (const RankOutcome& outcome : outcomes) EXPECT_FALSE(outcome.hung);
}

TEST(TcpRanks, FollowerWithoutRankZeroTimesOut) {
  const int port = testing::free_local_port();
  const auto outcomes = finish_all(
      {start_rank([=] { run_rank(job(port, 2, 1, 0, std::chrono::milliseconds(300)), 1, 1); })},
      20);
  EXPECT_EQ(outcomes[0].exit_code, 1);
  EXPECT_NE(outcomes[0].message.find("rank 1 (node 0) waiting up to 300 ms for rank 0"),
            std::string::npos)
      << outcomes[0].message;
  EXPECT_NE(outcomes[0].message.find("could not connect to 127.0.0.1"), std::string::npos)
      << outcomes[0].message;
}

TEST(TcpRanks, RankOfAnotherJobIsRefusedByName) {
  // Rank 1 was started with --tensor-parallel-size 4, rank 0 with 2.
  const int port = testing::free_local_port();
  const auto outcomes = finish_all({start_rank([=] { run_rank(job(port, 2, 1, 0), 0, 1); }),
                                    start_rank([=] { run_rank(job(port, 4, 1, 0), 1, 1); })},
                                   20);
  for (const RankOutcome& outcome : outcomes) {
    EXPECT_EQ(outcome.exit_code, 1);
    EXPECT_NE(outcome.message.find("was started with --tensor-parallel-size 4 --nnodes 1, rank 0 "
                                   "with 2 and 1"),
              std::string::npos)
        << outcome.message;
  }
}

TEST(RankMessages, StepPlansSurviveEncodingAndTruncationIsAnError) {
  for (int64_t step = 0; step < 4; ++step) {
    const StepPlan plan = plan_of_step(step);
    const std::vector<std::byte> bytes = encode_step_plan(plan);
    EXPECT_EQ(decode_step_plan(bytes), plan);
    EXPECT_THROW(decode_step_plan(std::span(bytes).first(bytes.size() - 1)), Error);
  }
}

TEST(DistributedOptions, BadJobsNameTheFlag) {
  EXPECT_THROW(check_distributed_options(job(1, 3, 2, 0)), Error);  // 3 ranks on 2 nodes
  EXPECT_THROW(check_distributed_options(job(1, 4, 2, 2)), Error);  // node rank 2 of 2
  EXPECT_EQ(global_rank(job(1, 8, 2, 1), 3), 7);
  EXPECT_THROW(parse_host_port("localhost"), Error);
  EXPECT_THROW(parse_host_port("localhost:70000"), Error);
  EXPECT_EQ(parse_host_port("[::1]:5000").host, "::1");
  EXPECT_EQ(parse_host_port("10.0.0.1:29500").port, 29500);
}

}  // namespace
}  // namespace oscar
