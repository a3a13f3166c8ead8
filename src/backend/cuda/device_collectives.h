#pragma once
// The collectives of a tensor-parallel CUDA backend, on buffers in device memory, enqueued on the
// backend's stream: NCCL between GPUs (nccl_group.h), or host memory and a host Communicator
// (host_collectives.h) for ranks that share a GPU.
#include <cuda_runtime.h>

#include <cstdint>

namespace oscar::cuda {

class DeviceCollectives {
 public:
  virtual ~DeviceCollectives() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // Whether the calls may be recorded into a CUDA graph (the decode steps' graphs).
  virtual bool capturable() const = 0;

  // In place: values = the sum over ranks (the same bits on every rank).
  virtual void all_reduce_sum(float* values, int64_t count, cudaStream_t stream) = 0;
  // In place: gathered holds world_size parts of `count` floats, this rank's at rank * count.
  virtual void all_gather(float* gathered, int64_t count, cudaStream_t stream) = 0;
  // Device memory of at least `count` floats on which all_reduce_sum runs faster than on plain
  // device memory (NCCL: a window registered on every rank for its symmetric kernels), owned by
  // the group and kept for its life; null where the group has none. Every rank must call it in the
  // same order with the same count, and reduce at the same offsets into it.
  virtual float* reduce_window(int64_t count) {
    (void)count;
    return nullptr;
  }
  // Waits for `stream`'s work; `what` names the wait in errors.
  virtual void synchronize(cudaStream_t stream, const char* what) = 0;
};

}  // namespace oscar::cuda
