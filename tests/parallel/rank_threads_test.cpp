// Ranks as threads: the first rank's error comes back once all have ended, the others learn of it
// while they wait, and a rank that never ends cannot hang the process.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "parallel/rank_threads.h"
#include "util/error.h"

namespace oscar {
namespace {

using namespace std::chrono_literals;

// Rank 0 waits for its peer as a collective would: until peer_failure names a failure.
void wait_for_peer(const RankThreadHooks& hooks) {
  while (hooks.peer_failure().empty()) std::this_thread::sleep_for(1ms);
  fail("rank 0: {}", hooks.peer_failure());
}

TEST(RankThreads, EveryRankRunsAndNothingIsThrown) {
  std::atomic<int> ran = 0;
  run_ranks_as_threads(
      4, [&](int, const RankThreadHooks&) { ++ran; }, 1s);
  EXPECT_EQ(ran, 4);
}

TEST(RankThreads, TheFailedRanksErrorComesBackAndThePeersLearnOfIt) {
  std::string peer_error;
  try {
    run_ranks_as_threads(
        2,
        [&](int rank, const RankThreadHooks& hooks) {
          if (rank == 1) fail("rank 1 stops here");
          try {
            wait_for_peer(hooks);
          } catch (const Error& e) {
            peer_error = e.what();
            throw;
          }
        },
        10s);
    FAIL() << "a failed rank went unnoticed";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "rank 1 stops here");
  }
  EXPECT_EQ(peer_error, "rank 0: rank 1 failed");
}

TEST(RankThreads, LeavingOnAnErrorIsSeenBeforeTheRankEnds) {
  std::atomic<bool> peer_saw_it = false;
  EXPECT_THROW(run_ranks_as_threads(
                   2,
                   [&](int rank, const RankThreadHooks& hooks) {
                     if (rank == 1) {
                       hooks.leaving_on_error();
                       while (!peer_saw_it) std::this_thread::sleep_for(1ms);
                       fail("rank 1 left");
                     }
                     while (hooks.peer_failure().empty()) std::this_thread::sleep_for(1ms);
                     peer_saw_it = true;
                   },
                   10s),
               Error);
  EXPECT_TRUE(peer_saw_it);
}

// A rank blocked where it never asks (as a GPU rank behind NCCL's kernel): the process ends with
// the failed rank's error and the stuck rank named, instead of hanging.
TEST(RankThreadsDeathTest, ARankThatNeverEndsEndsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(run_ranks_as_threads(
                  3,
                  [](int rank, const RankThreadHooks& hooks) {
                    if (rank == 1) fail("rank 1 stops here");
                    if (rank == 2) wait_for_peer(hooks);
                    while (true) std::this_thread::sleep_for(1s);
                  },
                  200ms),
              ::testing::ExitedWithCode(1), "rank 1 stops here; rank\\(s\\) 0 still running");
}

}  // namespace
}  // namespace oscar
