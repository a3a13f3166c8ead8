#include "backend/cuda/host_collectives.h"

#include <span>

#include "backend/cuda/cuda_check.h"

namespace oscar::cuda {

void HostCollectives::all_reduce_sum(float* values, int64_t count, cudaStream_t stream) {
  staging_.reserve(size_t(count));
  const size_t bytes = size_t(count) * sizeof(float);
  check(cudaMemcpyAsync(staging_.data(), values, bytes, cudaMemcpyDeviceToHost, stream),
        "cudaMemcpyAsync(all-reduce)");
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(all-reduce)");
  communicator_.all_reduce_sum(std::span(staging_.data(), size_t(count)));
  check(cudaMemcpyAsync(values, staging_.data(), bytes, cudaMemcpyHostToDevice, stream),
        "cudaMemcpyAsync(all-reduce)");
  // The staging buffer is reused by the next call: the copy must be done with it first.
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(all-reduce)");
}

void HostCollectives::all_gather(float* gathered, int64_t count, cudaStream_t stream) {
  const size_t parts = size_t(world_size());
  staging_.reserve(parts * size_t(count) + size_t(count));
  float* mine = staging_.data() + parts * size_t(count);
  const size_t bytes = size_t(count) * sizeof(float);
  check(cudaMemcpyAsync(mine, gathered + rank() * count, bytes, cudaMemcpyDeviceToHost, stream),
        "cudaMemcpyAsync(all-gather)");
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(all-gather)");
  communicator_.all_gather(std::span<const float>(mine, size_t(count)),
                           std::span(staging_.data(), parts * size_t(count)));
  check(cudaMemcpyAsync(gathered, staging_.data(), parts * bytes, cudaMemcpyHostToDevice, stream),
        "cudaMemcpyAsync(all-gather)");
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(all-gather)");
}

void HostCollectives::synchronize(cudaStream_t stream, const char* what) {
  check(cudaStreamSynchronize(stream), what);
}

}  // namespace oscar::cuda
