#pragma once
// Device collectives through host memory: each call waits for the stream, copies the values to
// pinned host memory, runs the host Communicator's collective (parallel/communicator.h) and copies
// the result back. For ranks that share one GPU (threads of a test, each with its own shard) or
// that have no NCCL; it cannot be recorded into a graph, so their decode steps run without one.
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/device_collectives.h"
#include "parallel/communicator.h"

namespace oscar::cuda {

class HostCollectives final : public DeviceCollectives {
 public:
  explicit HostCollectives(Communicator& communicator) : communicator_(communicator) {}

  int rank() const override { return communicator_.rank(); }
  int world_size() const override { return communicator_.world_size(); }
  bool capturable() const override { return false; }
  void all_reduce_sum(float* values, int64_t count, cudaStream_t stream) override;
  void all_gather(float* gathered, int64_t count, cudaStream_t stream) override;
  void synchronize(cudaStream_t stream, const char* what) override;

 private:
  Communicator& communicator_;
  PinnedBuffer<float> staging_;
};

}  // namespace oscar::cuda
