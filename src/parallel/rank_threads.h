#pragma once
// Tensor-parallel ranks as threads of one process (the GPU benchmarks and tests). Each thread runs
// `rank(r, hooks)`; a rank that throws, or reports through hooks.leaving_on_error, marks the group
// failed, and hooks.peer_failure tells the other ranks why, so that their waits end in an error.
// Once every thread has ended, the first rank's error is rethrown.
//
// A rank that cannot ask (a GPU rank whose thread is blocked launching work behind a collective
// kernel that waits for the dead peer) cannot be stopped from outside the process. So when ranks
// are still running `grace` after the first failure, the process ends with exit code 1 and the
// error on stderr, as PyTorch's NCCL watchdog does: an error, never a hang.
#include <chrono>
#include <functional>
#include <string>

namespace oscar {

struct RankThreadHooks {
  std::function<std::string()> peer_failure;  // why a peer failed, or empty
  std::function<void()> leaving_on_error;     // this rank is leaving on an error
};

void run_ranks_as_threads(int world_size,
                          const std::function<void(int rank, const RankThreadHooks&)>& rank,
                          std::chrono::milliseconds grace);

}  // namespace oscar
