// SwiGLU after a gate|up product through cuBLAS (more than 32 rows; fewer take skinny_linear.cu's,
// which applies it itself): gate and up from the product's columns (gate_up_layout.h), the output
// down_proj's bf16 input.
#include <algorithm>
#include <string>

#include "backend/cuda/chained_launch.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/gate_up_layout.h"
#include "backend/cuda/layer_kernels.h"
#include "backend/cuda/swiglu.cuh"
#include "backend/cuda/warp_primitives.cuh"

namespace oscar::cuda {
namespace {

// With gate_up_layout.h's groups of four columns (gate 2k, 2k + 1, up 2k, 2k + 1), the product's
// float4 f and the output's bf16 pair f hold the same two SwiGLU pairs, whatever the row: each
// thread reads 16 aligned bytes and writes 4, with no index arithmetic but the loop's.
__global__ void swiglu_kernel(const float4* gate_up, int64_t pairs, __nv_bfloat162* out) {
  wait_for_producer();
  release_consumer();
  for (int64_t f = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; f < pairs;
       f += int64_t(gridDim.x) * blockDim.x) {
    const float4 v = gate_up[f];
    out[f] = __halves2bfloat162(swiglu_bf16(v.x, v.z), swiglu_bf16(v.y, v.w));
  }
}

}  // namespace

void launch_swiglu(const float* gate_up, int64_t rows, int64_t inner, __nv_bfloat16* out,
                   cudaStream_t stream) {
  if (rows == 0) return;
  static_assert(gate_column(0) == 0 && gate_column(1) == 1 && up_column(0) == 2 &&
                    up_column(1) == 3 && gate_column(2) == 4,
                "the kernel reads a group of four columns as two SwiGLU pairs");
  require_launch(inner % 2 == 0, "swiglu: an odd intermediate size, " + std::to_string(inner));
  const int64_t pairs = rows * inner / 2;
  const int64_t blocks = std::min<int64_t>((pairs + 255) / 256, 65536);
  launch_chained("swiglu_kernel", swiglu_kernel, dim3(unsigned(blocks)), dim3(256), 0, stream,
                 reinterpret_cast<const float4*>(gate_up), pairs,
                 reinterpret_cast<__nv_bfloat162*>(out));
}

}  // namespace oscar::cuda
