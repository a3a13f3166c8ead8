#pragma once
// Kernel launches with programmatic dependent launch (Hopper): the kernel may be scheduled while
// the one before it in the stream is still running, instead of after it has drained, so that its
// launch, block scheduling and reads of weights overlap the previous kernel's last blocks. The
// kernel must call wait_for_producer() (warp_primitives.cuh) before it touches anything an
// earlier kernel wrote, and release_consumer() after it. Captured into a CUDA graph, the launch
// becomes a programmatic edge. A decode step is a chain of ~11 small kernels per layer; each
// boundary drained the GPU before the next kernel's first loads were issued. Kernels that stream
// weights issue their first weight loads before waiting.
#include <cuda_runtime.h>

#include <utility>

#include "backend/cuda/cuda_check.h"

namespace oscar::cuda {

template <typename... Params, typename... Args>
void launch_chained(const char* kernel_name, void (*kernel)(Params...), dim3 grid, dim3 block,
                    size_t shared_bytes, cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = 1;
  check(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...), kernel_name);
}

}  // namespace oscar::cuda
