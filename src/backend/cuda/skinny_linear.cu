// A block computes 4 outputs for every row; its 8 warps split the inputs into 8
// slices, each lane reading 16 bytes of each of the block's weight rows per step (streaming loads:
// the weights are read once) and the rows' matching 16 bytes of x (cached: every block reads all
// of x). Partial sums meet in shared memory in a fixed order, so results do not depend on timing.
//
// Why, and why only for one or two rows: on the H100 at Qwen3-8B's shapes (products back to back,
// weights never in L2), one row takes 18.6 / 13.3 / 65.6 / 35.2 / 390 us for q|k|v, o, gate|up,
// down and the LM head (85-107% of the copy bandwidth), cuBLAS 21.9 / 16.4 / 73.6 / 39.8 / 437;
// two rows 19.9 / 14.6 / 66.7 / 37.0 / 393 against the same. From four rows on cuBLAS is as fast
// or faster (its tensor-core kernels; this one's FMA count grows with the rows) and takes over.
#include <stdexcept>
#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/skinny_linear.h"

namespace oscar::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kMaxRows = 2;
constexpr int kOutputsPerBlock = 4;  // of 2, 4, 8 and 16 the fastest at one and two rows
constexpr int kChunk = 8;  // bf16 values per 16-byte load

__device__ __forceinline__ void unpack(const uint4 packed, float (&out)[kChunk]) {
  const uint32_t words[4] = {packed.x, packed.y, packed.z, packed.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    out[2 * i] = __uint_as_float(words[i] << 16);
    out[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
  }
}

template <int kRows>
__global__ void __launch_bounds__(kWarps * 32) skinny_linear_kernel(const __nv_bfloat16* __restrict__ x, int rows,
                                                                    const __nv_bfloat16* __restrict__ w, int outputs,
                                                                    int inputs, float* __restrict__ y,
                                                                    bool accumulate) {
  __shared__ float partial[kWarps][kOutputsPerBlock][kRows];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int first_output = blockIdx.x * kOutputsPerBlock;
  const int slice = inputs / kWarps;
  const int begin = warp * slice, end = begin + slice;
  float sums[kOutputsPerBlock][kRows] = {};
#pragma unroll 2
  for (int k = begin + lane * kChunk; k < end; k += 32 * kChunk) {
    float ws[kOutputsPerBlock][kChunk];
#pragma unroll
    for (int o = 0; o < kOutputsPerBlock; ++o) {
      const uint4 packed = first_output + o < outputs
                               ? __ldcs(reinterpret_cast<const uint4*>(w + int64_t(first_output + o) * inputs + k))
                               : make_uint4(0, 0, 0, 0);
      unpack(packed, ws[o]);
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      if (r >= rows) break;
      float xs[kChunk];
      unpack(__ldg(reinterpret_cast<const uint4*>(x + int64_t(r) * inputs + k)), xs);
#pragma unroll
      for (int o = 0; o < kOutputsPerBlock; ++o) {
#pragma unroll
        for (int i = 0; i < kChunk; ++i) sums[o][r] = fmaf(ws[o][i], xs[i], sums[o][r]);
      }
    }
  }
#pragma unroll
  for (int o = 0; o < kOutputsPerBlock; ++o) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      float value = sums[o][r];
      for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
      if (lane == 0) partial[warp][o][r] = value;
    }
  }
  __syncthreads();
  if (threadIdx.x >= kOutputsPerBlock * kRows) return;
  const int o = threadIdx.x / kRows, r = threadIdx.x % kRows;
  if (r >= rows || first_output + o >= outputs) return;
  float total = 0.0f;
#pragma unroll
  for (int v = 0; v < kWarps; ++v) total += partial[v][o][r];
  float& out = y[int64_t(r) * outputs + first_output + o];
  out = accumulate ? out + total : total;
}

template <int kRows>
void launch(const __nv_bfloat16* x, int rows, const __nv_bfloat16* w, int outputs, int inputs, float* y,
            bool accumulate, cudaStream_t stream) {
  const unsigned blocks = unsigned((outputs + kOutputsPerBlock - 1) / kOutputsPerBlock);
  skinny_linear_kernel<kRows><<<blocks, kWarps * 32, 0, stream>>>(x, rows, w, outputs, inputs, y, accumulate);
  check_launch("skinny_linear_kernel");
}

}  // namespace

bool skinny_linear_supports(int64_t rows, int64_t inputs) {
  return rows >= 1 && rows <= kMaxRows && inputs % (kWarps * kChunk) == 0 && inputs <= (int64_t(1) << 30);
}

void skinny_linear(const __nv_bfloat16* x, int64_t rows, const __nv_bfloat16* w, int64_t outputs, int64_t inputs,
                   float* y, bool accumulate, cudaStream_t stream) {
  if (!skinny_linear_supports(rows, inputs) || outputs > (int64_t(1) << 30)) {
    throw std::invalid_argument("skinny_linear: " + std::to_string(rows) + " rows x " + std::to_string(inputs) +
                                " inputs is not supported");
  }
  if (rows == 1) return launch<1>(x, 1, w, int(outputs), int(inputs), y, accumulate, stream);
  launch<2>(x, 2, w, int(outputs), int(inputs), y, accumulate, stream);
}

}  // namespace oscar::cuda
