// SwiGLU after a gate|up product through cuBLAS (more than 32 rows; fewer take skinny_linear.cu's,
// which applies it itself): gate and up from the product's columns (gate_up_layout.h), the output
// down_proj's bf16 input.
#include <algorithm>

#include "backend/cuda/chained_launch.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/gate_up_layout.h"
#include "backend/cuda/layer_kernels.h"
#include "backend/cuda/swiglu.cuh"
#include "backend/cuda/warp_primitives.cuh"

namespace oscar::cuda {
namespace {

__global__ void swiglu_kernel(const float* gate_up, int64_t rows, int64_t inner,
                              __nv_bfloat16* out) {
  wait_for_producer();
  release_consumer();
  const int64_t total = rows * inner;
  for (int64_t index = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; index < total;
       index += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = index / inner, i = index % inner;
    const float* columns = gate_up + row * 2 * inner;
    out[index] = swiglu_bf16(columns[gate_column(i)], columns[up_column(i)]);
  }
}

}  // namespace

void launch_swiglu(const float* gate_up, int64_t rows, int64_t inner, __nv_bfloat16* out,
                   cudaStream_t stream) {
  if (rows == 0) return;
  const int64_t blocks = std::min<int64_t>((rows * inner + 255) / 256, 65536);
  launch_chained("swiglu_kernel", swiglu_kernel, dim3(unsigned(blocks)), dim3(256), 0, stream,
                 gate_up, rows, inner, out);
}

}  // namespace oscar::cuda
