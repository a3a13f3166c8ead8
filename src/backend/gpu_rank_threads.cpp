#include "backend/gpu_rank_threads.h"

#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "util/error.h"

namespace oscar {

void run_gpu_ranks_as_threads(int world_size, const std::function<void(const GpuGroup&)>& rank,
                              std::chrono::milliseconds timeout) {
  require(world_size >= 1, "{} tensor-parallel ranks", world_size);
  const UniqueId id = make_gpu_group_id();
  std::mutex mutex;
  std::string failure;  // the first rank's error, for the others' waits
  std::exception_ptr first_error;
  std::vector<std::thread> threads;
  for (int r = 0; r < world_size; ++r) {
    threads.emplace_back([&, r] {
      try {
        use_gpu_of_local_rank(r);
        GpuGroup group;
        group.rank = r;
        group.world_size = world_size;
        group.unique_id = id;
        group.timeout = timeout;
        group.peer_failure = [&] {
          const std::lock_guard lock(mutex);
          return failure;
        };
        group.leaving_on_error = [&, r] {
          const std::lock_guard lock(mutex);
          if (failure.empty()) failure = fmt::format("rank {} failed", r);
        };
        rank(group);
      } catch (...) {
        const std::lock_guard lock(mutex);
        if (!first_error) first_error = std::current_exception();
        if (failure.empty()) failure = fmt::format("rank {} failed", r);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace oscar
