// Two kernels for the decode step's products of a few rows, where the time is the weight read.
//
// One or two rows, CUDA-core FMA: a block computes 4 outputs for every row; its 8 warps split the
// inputs into 8 slices, each lane reading 16 bytes of each of the block's weight rows per step
// (streaming loads: the weights are read once) and the rows' matching 16 bytes of x (cached: every
// block reads all of x).
//
// Three to thirty-two rows, tensor cores (mma.m16n8k16, 16 outputs x 8 rows per tile): the FMA
// kernel's instruction count grows with the rows, and cuBLAS's kernels for a few rows read the
// weights at 60-76% of the copy bandwidth (at 17-32 rows 72-91%, with a split-K reduce and, for
// gate|up, the SwiGLU kernel after them). A block computes 16 outputs; its 8 warps split the
// inputs; each lane loads 16 bytes of weight rows g and g + 8 and of x row g straight into the mma
// operands (no shared memory), four steps in flight while the previous four multiply (two at
// 17-32 rows, where the x operands take more registers; see launch()).
//
// Both: partial sums meet in shared memory in a fixed order, so results do not depend on timing.
// For the gate|up product both apply SwiGLU themselves (a block's 4 or 16 outputs hold whole pairs,
// gate_up_layout.h) and write down_proj's bf16 input: no SwiGLU kernel between the two products.
//
// `oscar bench linear` times both kernels against cuBLAS at a model's shapes (docs/bench/README.md;
// the runs behind the choices here:
// docs/bench/notes/2026-11-28-measurements-from-code-comments.md). 17-32 rows: see launch().
#include <stdexcept>
#include <string>

#include "backend/cuda/chained_launch.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/gate_up_layout.h"
#include "backend/cuda/skinny_linear.h"
#include "backend/cuda/swiglu.cuh"
#include "backend/cuda/warp_primitives.cuh"

namespace oscar::cuda {
namespace {

constexpr int kWarps = 8;  // both kernels split the inputs over 8 warps
constexpr int kFmaMaxRows = 2;
constexpr int kMmaMaxRows = 32;
constexpr int kChunkInputs = 32;  // inputs of a row a warp covers per step: 4 lanes x 8 bf16 (mma),
                                  // and the granularity of both kernels' input slices

// Where a product's results go: y [rows][outputs] (stored, or added with `accumulate`), or, with
// `activation`, the SwiGLU of each gate|up pair (gate_up_layout.h) into activation [rows][outputs /
// 2].
struct Destination {
  float* y;
  bool accumulate;
  __nv_bfloat16* activation;
};

// Output `output` of row r, the block's output `local`, whose warp v's partial sum is
// partial(v, local): the warps' sums added in warp order. With SwiGLU, the thread of a gate column
// also sums its up column (gate_up_layout.h) and writes the pair; an up column's thread writes
// nothing.
template <typename Partial>
__device__ __forceinline__ void deliver(Partial partial, int local, int64_t r, int output,
                                        int outputs, const Destination& d) {
  auto total = [&](int k) {
    float sum = 0.0f;
#pragma unroll
    for (int v = 0; v < kWarps; ++v) sum += partial(v, k);
    return sum;
  };
  if (d.activation != nullptr) {
    if (!is_gate_column(output)) return;
    const int64_t pair = pair_of_column(output);
    const int up = local + int(up_column(pair) - output);
    d.activation[r * (outputs / 2) + pair] = swiglu_bf16(total(local), total(up));
    return;
  }
  const int64_t index = r * outputs + output;
  d.y[index] = d.accumulate ? d.y[index] + total(local) : total(local);
}

// ---- one or two rows: FMA ----

constexpr int kOutputsPerBlock = 4;  // of 2, 4, 8 and 16 the fastest at one and two rows
constexpr int kChunk = 8;            // bf16 values per 16-byte load

template <int kRows>
__global__ void __launch_bounds__(kWarps * 32)
    fma_linear_kernel(const __nv_bfloat16* __restrict__ x, int rows,
                      const __nv_bfloat16* __restrict__ w, int outputs, int inputs, Destination d) {
  __shared__ float partial[kWarps][kOutputsPerBlock][kRows];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int first_output = blockIdx.x * kOutputsPerBlock;
  wait_for_producer();
  release_consumer();
  const int chunks = inputs / kChunkInputs;
  const int begin = warp * chunks / kWarps * kChunkInputs,
            end = (warp + 1) * chunks / kWarps * kChunkInputs;
  float sums[kOutputsPerBlock][kRows] = {};
#pragma unroll 2
  for (int k = begin + lane * kChunk; k < end; k += 32 * kChunk) {
    float ws[kOutputsPerBlock][kChunk];
#pragma unroll
    for (int o = 0; o < kOutputsPerBlock; ++o) {
      const uint4 packed =
          first_output + o < outputs
              ? __ldcs(reinterpret_cast<const uint4*>(w + int64_t(first_output + o) * inputs + k))
              : make_uint4(0, 0, 0, 0);
      unpack_bf16x8(packed, ws[o]);
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      if (r >= rows) break;
      float xs[kChunk];
      unpack_bf16x8(__ldg(reinterpret_cast<const uint4*>(x + int64_t(r) * inputs + k)), xs);
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
      for (int offset = 16; offset > 0; offset /= 2)
        value += __shfl_xor_sync(0xffffffffu, value, offset);
      if (lane == 0) partial[warp][o][r] = value;
    }
  }
  __syncthreads();
  if (threadIdx.x >= kOutputsPerBlock * kRows) return;
  const int o = threadIdx.x / kRows, r = threadIdx.x % kRows;
  if (r >= rows || first_output + o >= outputs) return;
  deliver([&](int v, int k) { return partial[v][k][r]; }, o, r, first_output + o, outputs, d);
}

// ---- three to thirty-two rows: mma.m16n8k16 ----

constexpr int kTileOutputs = 16;  // the mma's M

template <int kRowTiles, int kSteps>
struct MmaOperands {
  uint4 low[kSteps], high[kSteps];  // weight rows g and g + 8, 8 inputs each
  uint4 x[kSteps][kRowTiles];       // x row 8 * tile + g, the same 8 inputs
};

template <int kRowTiles>
struct MmaTile {
  const uint4* w_low;
  const uint4* w_high;
  const uint4* x_row[kRowTiles];
  float acc[kRowTiles][4] = {};

  static constexpr int kStride = kChunkInputs / 8;  // uint4 per step

  template <int kSteps>
  __device__ __forceinline__ void load_weights(MmaOperands<kRowTiles, kSteps>& f, int step) const {
#pragma unroll
    for (int u = 0; u < kSteps; ++u) {
      f.low[u] = __ldcs(w_low + (step + u) * kStride);
      f.high[u] = __ldcs(w_high + (step + u) * kStride);
    }
  }
  template <int kSteps>
  __device__ __forceinline__ void load_inputs(MmaOperands<kRowTiles, kSteps>& f, int step) const {
#pragma unroll
    for (int u = 0; u < kSteps; ++u) {
#pragma unroll
      for (int i = 0; i < kRowTiles; ++i) f.x[u][i] = __ldg(x_row[i] + (step + u) * kStride);
    }
  }
  template <int kSteps>
  __device__ __forceinline__ void load(MmaOperands<kRowTiles, kSteps>& f, int step) const {
    load_weights(f, step);
    load_inputs(f, step);
  }

  // The 8 inputs a lane holds per row are two k-steps of the mma (A: (row g, k 2t, 2t+1) and
  // (row g, k 2t+8, 2t+9) in registers 0 and 2; B: (k 2t, 2t+1) and (k 2t+8, 2t+9) of column g).
  // Both operands take them in the same order, so every product pairs a weight with its input.
  template <int kSteps>
  __device__ __forceinline__ void multiply(const MmaOperands<kRowTiles, kSteps>& f) {
#pragma unroll
    for (int u = 0; u < kSteps; ++u) {
      const uint32_t a0[4] = {f.low[u].x, f.high[u].x, f.low[u].y, f.high[u].y};
      const uint32_t a1[4] = {f.low[u].z, f.high[u].z, f.low[u].w, f.high[u].w};
#pragma unroll
      for (int i = 0; i < kRowTiles; ++i) {
        const uint32_t b0[2] = {f.x[u][i].x, f.x[u][i].y}, b1[2] = {f.x[u][i].z, f.x[u][i].w};
        mma_bf16(acc[i], a0, b0);
        mma_bf16(acc[i], a1, b1);
      }
    }
  }
};

// kUnroll: steps per batch of loads; kBlocksPerSm: __launch_bounds__'s minimum blocks, 0 for
// none (the two change ptxas's register budget and schedule; see launch()).
template <int kRowTiles, int kUnroll, int kBlocksPerSm>
__global__ void __launch_bounds__(kWarps * 32, kBlocksPerSm)
    mma_linear_kernel(const __nv_bfloat16* __restrict__ x, int rows,
                      const __nv_bfloat16* __restrict__ w, int outputs, int inputs, Destination d) {
  __shared__ float partial[kWarps][kRowTiles * 8][kTileOutputs + 1];  // +1: no bank conflicts
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int first_output = blockIdx.x * kTileOutputs;
  const int chunks = inputs / kChunkInputs;
  const int chunk_begin = warp * chunks / kWarps,
            steps = (warp + 1) * chunks / kWarps - chunk_begin;
  const int64_t column = int64_t(chunk_begin) * kChunkInputs + 8 * t;
  // Rows past the last output or the last x row read the last one instead (valid memory); their
  // results are never written.
  MmaTile<kRowTiles> tile;
  tile.w_low = reinterpret_cast<const uint4*>(
      w + int64_t(min(first_output + g, outputs - 1)) * inputs + column);
  tile.w_high = reinterpret_cast<const uint4*>(
      w + int64_t(min(first_output + g + 8, outputs - 1)) * inputs + column);
#pragma unroll
  for (int i = 0; i < kRowTiles; ++i)
    tile.x_row[i] =
        reinterpret_cast<const uint4*>(x + int64_t(min(8 * i + g, rows - 1)) * inputs + column);

  int step = 0;
  if (steps >= kUnroll) {
    MmaOperands<kRowTiles, kUnroll> current, next;
    // The first weights are on their way while the kernel that writes x finishes.
    tile.load_weights(current, 0);
    wait_for_producer();
    release_consumer();
    tile.load_inputs(current, 0);
    for (; step + 2 * kUnroll <= steps; step += kUnroll) {
      tile.load(next, step + kUnroll);
      tile.multiply(current);
      current = next;
    }
    tile.multiply(current);
    step += kUnroll;
  } else {
    wait_for_producer();
    release_consumer();
  }
  for (; step < steps; ++step) {
    MmaOperands<kRowTiles, 1> single;
    tile.load(single, step);
    tile.multiply(single);
  }
  // C fragment: c0, c1 = (output g, x rows 2t, 2t + 1), c2, c3 = (output g + 8, the same rows).
#pragma unroll
  for (int i = 0; i < kRowTiles; ++i) {
    partial[warp][8 * i + 2 * t][g] = tile.acc[i][0];
    partial[warp][8 * i + 2 * t + 1][g] = tile.acc[i][1];
    partial[warp][8 * i + 2 * t][g + 8] = tile.acc[i][2];
    partial[warp][8 * i + 2 * t + 1][g + 8] = tile.acc[i][3];
  }
  __syncthreads();
  for (int index = threadIdx.x; index < kRowTiles * 8 * kTileOutputs; index += kWarps * 32) {
    const int r = index / kTileOutputs, o = index % kTileOutputs;
    if (r >= rows || first_output + o >= outputs) continue;
    deliver([&](int v, int k) { return partial[v][r][k]; }, o, r, first_output + o, outputs, d);
  }
}

template <int kRows>
void launch_fma(const __nv_bfloat16* x, int rows, const __nv_bfloat16* w, int outputs, int inputs,
                Destination d, cudaStream_t stream) {
  const unsigned blocks = unsigned((outputs + kOutputsPerBlock - 1) / kOutputsPerBlock);
  launch_chained("fma_linear_kernel", fma_linear_kernel<kRows>, dim3(blocks), dim3(kWarps * 32), 0,
                 stream, x, rows, w, outputs, inputs, d);
}

template <int kRowTiles, int kUnroll, int kBlocksPerSm>
void launch_mma(const __nv_bfloat16* x, int rows, const __nv_bfloat16* w, int outputs, int inputs,
                Destination d, cudaStream_t stream) {
  const unsigned blocks = unsigned((outputs + kTileOutputs - 1) / kTileOutputs);
  launch_chained("mma_linear_kernel", mma_linear_kernel<kRowTiles, kUnroll, kBlocksPerSm>,
                 dim3(blocks), dim3(kWarps * 32), 0, stream, x, rows, w, outputs, inputs, d);
}

void launch(const __nv_bfloat16* x, int64_t rows, const __nv_bfloat16* w, int64_t outputs,
            int64_t inputs, Destination d, cudaStream_t stream) {
  if (!skinny_linear_supports(rows, inputs) || outputs > (int64_t(1) << 30)) {
    throw std::invalid_argument("skinny_linear: " + std::to_string(rows) + " rows x " +
                                std::to_string(inputs) + " inputs is not supported");
  }
  const int r = int(rows), o = int(outputs), i = int(inputs);
  if (r == 1) return launch_fma<1>(x, r, w, o, i, d, stream);
  if (r <= kFmaMaxRows) return launch_fma<2>(x, r, w, o, i, d, stream);
  // One and two row tiles: 4 steps a batch (2 and 8 measured no faster).
  // Three and four row tiles: the fastest of the variants measured (docs/bench/notes/
  // 2026-11-27-decode-step.md, "Products of 17-32 rows"): 2 steps a batch, at three tiles with a
  // minimum of 2 blocks per SM (123 registers), at four without (102; the minimum squeezes them
  // into 128 and spills). 4 steps at four tiles take 236 registers, one block per SM, and were
  // slower.
  if (r <= 8) return launch_mma<1, 4, 0>(x, r, w, o, i, d, stream);
  if (r <= 16) return launch_mma<2, 4, 0>(x, r, w, o, i, d, stream);
  if (r <= 24) return launch_mma<3, 2, 2>(x, r, w, o, i, d, stream);
  launch_mma<4, 2, 0>(x, r, w, o, i, d, stream);
}

}  // namespace

bool skinny_linear_supports(int64_t rows, int64_t inputs) {
  return rows >= 1 && rows <= kMmaMaxRows && inputs % kChunkInputs == 0 &&
         inputs <= (int64_t(1) << 30);
}

void skinny_linear(const __nv_bfloat16* x, int64_t rows, const __nv_bfloat16* w, int64_t outputs,
                   int64_t inputs, float* y, bool accumulate, cudaStream_t stream) {
  launch(x, rows, w, outputs, inputs, {y, accumulate, nullptr}, stream);
}

void skinny_linear_swiglu(const __nv_bfloat16* x, int64_t rows, const __nv_bfloat16* w,
                          int64_t inner, int64_t inputs, __nv_bfloat16* activation,
                          cudaStream_t stream) {
  // (util/error.h's fmt checks do not build under nvcc.)
  if (inner % 2 != 0) {
    throw std::invalid_argument(
        "skinny_linear_swiglu: " + std::to_string(inner) +
        " gate|up pairs: the layout needs an even number (gate_up_layout.h)");
  }
  launch(x, rows, w, 2 * inner, inputs, {nullptr, false, activation}, stream);
}

}  // namespace oscar::cuda
