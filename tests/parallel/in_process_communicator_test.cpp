// The in-process communicator's collectives between threads, and the failures that must end
// every rank rather than leave one waiting: a rank that aborts, a rank that never comes.
#include <gtest/gtest.h>

#include <thread>

#include "parallel/in_process_communicator.h"
#include "util/error.h"

namespace oscar {
namespace {

// Runs `body(communicator)` on every rank's thread; returns each rank's error ("" if none).
template <typename Body>
std::vector<std::string> run_ranks(InProcessGroup& group, Body body) {
  std::vector<std::string> errors(size_t(group.world_size()));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < group.world_size(); ++rank) {
    threads.emplace_back([&, rank] {
      try {
        const auto communicator = group.communicator(rank);
        body(*communicator);
      } catch (const Error& e) {
        errors[size_t(rank)] = e.what();
        group.abort(fmt::format("rank {} failed", rank));
      }
    });
  }
  for (auto& thread : threads) thread.join();
  return errors;
}

TEST(InProcessCommunicator, CollectivesCombineEveryRank) {
  for (const int world : {1, 2, 3, 4}) {
    InProcessGroup group(world);
    const size_t ranks = size_t(world);
    std::vector<std::vector<float>> sums(ranks), gathers(ranks), broadcasts(ranks);
    const auto errors = run_ranks(group, [&](Communicator& c) {
      const int r = c.rank();
      for (int repeat = 0; repeat < 50; ++repeat) {  // buffers reused back to back
        std::vector<float> values = {float(r + 1), float(10 * (r + 1)) + float(repeat)};
        c.all_reduce_sum(values);
        sums[size_t(r)] = values;
        const std::vector<float> mine = {float(r), float(r) + 0.5f};
        std::vector<float> gathered(mine.size() * size_t(world));
        c.all_gather(mine, gathered);
        gathers[size_t(r)] = gathered;
        std::vector<std::byte> bytes(3, std::byte(r));
        c.broadcast(bytes, world - 1);
        broadcasts[size_t(r)] = {float(bytes[0]), float(bytes[2])};
      }
    });
    const float n = float(world), total = n * (n + 1) / 2;
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(errors[size_t(r)], "");
      EXPECT_EQ(sums[size_t(r)], (std::vector<float>{total, 10 * total + 49 * n}));
      std::vector<float> expected;
      for (int other = 0; other < world; ++other) {
        expected.push_back(float(other));
        expected.push_back(float(other) + 0.5f);
      }
      EXPECT_EQ(gathers[size_t(r)], expected);
      EXPECT_EQ(broadcasts[size_t(r)], (std::vector<float>{n - 1, n - 1}));
    }
  }
}

TEST(InProcessCommunicator, FailedRankEndsTheOthers) {
  InProcessGroup group(3);
  const auto errors = run_ranks(group, [](Communicator& c) {
    if (c.rank() == 1) fail("rank 1 could not load its shard");
    std::vector<float> values(4, 1.0f);
    c.all_reduce_sum(values);
  });
  EXPECT_EQ(errors[1], "rank 1 could not load its shard");
  for (const int r : {0, 2}) {
    EXPECT_NE(errors[size_t(r)].find("the tensor-parallel group ended: rank 1 failed"),
              std::string::npos)
        << errors[size_t(r)];
  }
}

TEST(InProcessCommunicator, MissingRankTimesOut) {
  InProcessGroup group(2, std::chrono::milliseconds(100));
  const auto communicator = group.communicator(0);
  std::vector<float> values(2);
  try {
    communicator->all_reduce_sum(values);
    FAIL() << "an all-reduce completed without rank 1";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 waited 100 ms"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace oscar
