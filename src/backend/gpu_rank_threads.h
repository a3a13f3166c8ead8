#pragma once
// Tensor parallelism with the ranks as threads of one process, one GPU each (the GPU benchmarks and
// tests; serving runs a process a rank, cli/tensor_parallel_options.h). Thread r uses GPU r and
// gets its GpuGroup; a rank that throws tells the others, whose waits then end in an Error
// instead of waiting for its collectives, and the first error is rethrown here. Ranks still
// running `timeout` after a failure end the process (parallel/rank_threads.h). The group's NCCL
// id makes one communicator: each rank builds one backend with it (another run, another id).
#include <functional>

#include "parallel/gpu_group.h"

namespace oscar {

void run_gpu_ranks_as_threads(int world_size, const std::function<void(const GpuGroup&)>& rank,
                              std::chrono::milliseconds timeout = std::chrono::seconds(120));

}  // namespace oscar
