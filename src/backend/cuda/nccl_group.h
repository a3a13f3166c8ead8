#pragma once
// A tensor-parallel group of GPUs over NCCL: the communicator is made from rank 0's unique id, its
// collectives run on the backend's stream (and so inside its captured graphs). NCCL's kernels wait
// for their peers without end, so every wait for the stream goes through synchronize(), which
// watches the peers (GpuGroup::peer_failure), NCCL's own errors and the group's timeout, and on a
// failure aborts the communicator and throws Error naming the cause. After that the group is
// unusable and every later call throws the same error.
//
// reduce_window() registers one buffer of the group symmetrically on every rank (NCCL 2.27 and
// later), where NCCL runs its symmetric-memory kernels: one-shot reductions through peer memory
// for small messages. OSCAR_NCCL_SYMMETRIC=0 turns that off.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "backend/cuda/device_collectives.h"
#include "parallel/gpu_group.h"

namespace oscar::cuda {

bool nccl_available();  // false when this oscar was built without NCCL
UniqueId make_nccl_unique_id();

class NcclGroup final : public DeviceCollectives {
 public:
  // Joins the group on the current device; returns when every rank has joined, or throws.
  explicit NcclGroup(GpuGroup options);
  ~NcclGroup() override;
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;

  int rank() const override { return options_.rank; }
  int world_size() const override { return options_.world_size; }
  bool capturable() const override { return true; }
  void all_reduce_sum(float* values, int64_t count, cudaStream_t stream) override;
  void all_gather(float* gathered, int64_t count, cudaStream_t stream) override;
  float* reduce_window(int64_t count) override;
  // In place, bf16 values summed (NCCL accumulates in float32): for `oscar bench all-reduce`.
  void all_reduce_sum_bf16(void* values, int64_t count, cudaStream_t stream);
  void synchronize(cudaStream_t stream, const char* what) override;

 private:
  struct Comm;
  bool check_group(const char* what, std::chrono::steady_clock::time_point deadline);
  void wait_for_nccl(const char* what);
  [[noreturn]] void fail_group(const std::string& cause);
  void enqueue_all_reduce(void* values, int64_t count, bool bf16, cudaStream_t stream);

  GpuGroup options_;
  std::unique_ptr<Comm> comm_;
  std::string failure_;
};

}  // namespace oscar::cuda
