#include "backend/gpu_rank_threads.h"

#include "backend/backend.h"
#include "parallel/rank_threads.h"

namespace oscar {

void run_gpu_ranks_as_threads(int world_size, const std::function<void(const GpuGroup&)>& rank,
                              std::chrono::milliseconds timeout) {
  const UniqueId id = make_gpu_group_id();
  run_ranks_as_threads(
      world_size,
      [&](int r, const RankThreadHooks& hooks) {
        use_gpu_of_local_rank(r);
        GpuGroup group;
        group.rank = r;
        group.world_size = world_size;
        group.unique_id = id;
        group.timeout = timeout;
        group.peer_failure = hooks.peer_failure;
        group.leaving_on_error = hooks.leaving_on_error;
        rank(group);
      },
      timeout);
}

}  // namespace oscar
