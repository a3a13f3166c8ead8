#include "parallel/rank_threads.h"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "util/error.h"

namespace oscar {

void run_ranks_as_threads(int world_size,
                          const std::function<void(int rank, const RankThreadHooks&)>& rank,
                          std::chrono::milliseconds grace) {
  require(world_size >= 1, "{} tensor-parallel ranks", world_size);
  std::mutex mutex;
  std::condition_variable changed;
  std::string failure;  // the first failed rank, for the others' waits
  std::exception_ptr first_error;
  std::vector<bool> running(size_t(world_size), true);
  auto fail_group = [&](int r) {  // under the lock
    if (failure.empty()) failure = fmt::format("rank {} failed", r);
    changed.notify_all();
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < world_size; ++r) {
    threads.emplace_back([&, r] {
      RankThreadHooks hooks;
      hooks.peer_failure = [&] {
        const std::lock_guard lock(mutex);
        return failure;
      };
      hooks.leaving_on_error = [&, r] {
        const std::lock_guard lock(mutex);
        fail_group(r);
      };
      try {
        rank(r, hooks);
      } catch (...) {
        const std::lock_guard lock(mutex);
        if (!first_error) first_error = std::current_exception();
        fail_group(r);
      }
      const std::lock_guard lock(mutex);
      running[size_t(r)] = false;
      changed.notify_all();
    });
  }
  auto all_ended = [&] { return std::find(running.begin(), running.end(), true) == running.end(); };
  std::unique_lock lock(mutex);
  changed.wait(lock, [&] { return all_ended() || !failure.empty(); });
  if (!changed.wait_for(lock, grace, all_ended)) {
    std::string stuck;
    for (int r = 0; r < world_size; ++r) {
      if (running[size_t(r)]) stuck += fmt::format("{}{}", stuck.empty() ? "" : ", ", r);
    }
    const std::string why =
        first_error ? exception_message(first_error, "an exception that is not a std::exception")
                    : failure;
    std::fprintf(stderr,
                 "oscar: %s; rank(s) %s still running %.1f s after it, blocked where they cannot "
                 "see it (a GPU rank waiting behind a collective for its dead peer): the process "
                 "ends here\n",
                 why.c_str(), stuck.c_str(), double(grace.count()) / 1e3);
    std::fflush(stderr);
    std::_Exit(1);
  }
  lock.unlock();
  for (std::thread& thread : threads) thread.join();
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace oscar
