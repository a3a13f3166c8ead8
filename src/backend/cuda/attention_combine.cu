// Merges split attention results. Mirrors the softmax normalisation at the end of cpu_attention
// (backend/cpu/cpu_attention.cpp): the splits' maxima are reconciled (log-sum-exp), then the
// weighted values are divided by the total weight.
#include "backend/cuda/attention_combine.h"

#include <stdexcept>
#include <string>

#include "backend/cuda/chained_launch.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernel_sizes.h"
#include "backend/cuda/warp_primitives.cuh"

namespace oscar::cuda {
namespace {

constexpr int kPairs = kHeadDim / 2;  // a thread sums two channels: one 8-byte load per split
constexpr int kMaxSplitLanes = 8;     // threads per channel pair, each taking every lanes-th split
constexpr int kMaxThreads = kPairs * kMaxSplitLanes;
constexpr int kEarlySplits = 8;  // a thread's first splits whose values load beside the maxima

// Max or sum over the block, through `scratch` (one slot per warp).
template <bool Max>
__device__ float reduce_block(float value, float* scratch) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(0xffffffffu, value, offset);
    value = Max ? fmaxf(value, other) : value + other;
  }
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x / 32] = value;
  __syncthreads();
  value = scratch[0];
  for (int w = 1; w < int(blockDim.x / 32); ++w)
    value = Max ? fmaxf(value, scratch[w]) : value + scratch[w];
  __syncthreads();  // scratch is free for the next reduction
  return value;
}

// One block per (row, KV head, query head). A decode row has hundreds of splits at batch 1 and
// 128K: the maxima and sums are reduced by all threads together, then thread (lane, pair) sums
// channels 2 pair and 2 pair + 1 over splits lane, lane + lanes, ... with independent loads, and
// the lanes' sums meet in shared memory. (One block per (row, KV head) summing every split in one
// thread per channel kept eight SMs busy at batch 1, a chain of loads each.)
// The kernel's time is its chain of round trips, between the attention and the output projection
// of every layer: the task is read before waiting for the attention (it is the step's plan), and
// the values of a thread's first kEarlySplits splits load beside the maxima instead of after the
// two reductions. The sums keep their order, so the output is the same to the bit. (A one-pass
// version, each thread an online softmax over its splits, was faster, but it moved the outputs by
// rounding and flipped a near-tie of CudaMatchesCpu.GreedyContinuation.)
__global__ void attention_combine_kernel(const CombineTask* tasks, const float* partials,
                                         int num_kv_heads, int group, __nv_bfloat16* out,
                                         float* out_float) {
  __shared__ float scratch[kMaxThreads / 32];
  __shared__ float2 lane_sums[kMaxSplitLanes][kPairs];
  const int head = int(blockIdx.x) % group;
  const int row_head = int(blockIdx.x) / group;
  const int row = row_head / num_kv_heads, kv_head = row_head % num_kv_heads;
  const CombineTask task = tasks[row];
  wait_for_producer();
  release_consumer();
  if (task.count == 0) return;  // a row the prefill kernel wrote itself (attention_args.h)
  const int64_t record_floats = int64_t(group) * (kHeadDim + 2);
  const float* first = partials + int64_t(task.first + kv_head) * record_floats;
  const int64_t stride = int64_t(task.stride) * record_floats;
  const int lanes = int(blockDim.x) / kPairs;
  const int pair = int(threadIdx.x) % kPairs, lane = int(threadIdx.x) / kPairs;
  auto values_of = [&](int s) {
    return reinterpret_cast<const float2*>(first + s * stride + 2 * group + head * kHeadDim);
  };
  float2 early[kEarlySplits];
#pragma unroll
  for (int k = 0; k < kEarlySplits; ++k) {
    const int s = lane + k * lanes;
    early[k] = s < task.count ? values_of(s)[pair] : make_float2(0.0f, 0.0f);
  }
  float max = -INFINITY;
  for (int s = int(threadIdx.x); s < task.count; s += int(blockDim.x))
    max = fmaxf(max, first[s * stride + head]);
  max = reduce_block<true>(max, scratch);
  float sum = 0.0f;
  for (int s = int(threadIdx.x); s < task.count; s += int(blockDim.x)) {
    const float* record = first + s * stride;
    sum += record[group + head] * fast_exp2(record[head] - max);
  }
  sum = reduce_block<false>(sum, scratch);
  float2 value = make_float2(0.0f, 0.0f);
  auto add = [&](int s, float2 o) {
    const float weight = fast_exp2(first[s * stride + head] - max);
    value.x += o.x * weight;
    value.y += o.y * weight;
  };
#pragma unroll
  for (int k = 0; k < kEarlySplits; ++k) {
    const int s = lane + k * lanes;
    if (s < task.count) add(s, early[k]);
  }
#pragma unroll 4
  for (int s = lane + kEarlySplits * lanes; s < task.count; s += lanes) add(s, values_of(s)[pair]);
  lane_sums[lane][pair] = value;
  __syncthreads();
  if (lane != 0) return;
  for (int l = 1; l < lanes; ++l) {
    value.x += lane_sums[l][pair].x;
    value.y += lane_sums[l][pair].y;
  }
  const float2 result = make_float2(value.x / sum, value.y / sum);
  const int64_t index =
      ((int64_t(row) * num_kv_heads + kv_head) * group + head) * kHeadDim + 2 * pair;
  *reinterpret_cast<__nv_bfloat162*>(out + index) = __floats2bfloat162_rn(result.x, result.y);
  if (out_float != nullptr) *reinterpret_cast<float2*>(out_float + index) = result;
}

}  // namespace

void launch_attention_combine(const CombineTask* tasks, int64_t rows, int64_t max_splits,
                              const float* partials, int num_kv_heads, int group, int head_dim,
                              __nv_bfloat16* out, float* out_float, cudaStream_t stream) {
  if (rows == 0 || max_splits == 0) return;  // no row has partial records
  // (util/error.h's fmt checks do not build under nvcc.)
  if (head_dim != kHeadDim) {
    throw std::invalid_argument("attention_combine: head_dim " + std::to_string(head_dim) +
                                " is not supported (the kernel needs 128)");
  }
  // Enough lanes that each one's splits are its early loads (up to kMaxSplitLanes). A lane per
  // split made blocks of 512 threads per head from 5 splits on, and a batch's blocks more waves.
  int lanes = 1;
  while (lanes < kMaxSplitLanes && lanes * kEarlySplits < max_splits) lanes *= 2;
  launch_chained("attention_combine_kernel", attention_combine_kernel,
                 dim3(unsigned(rows * num_kv_heads * group)), dim3(unsigned(kPairs * lanes)), 0,
                 stream, tasks, partials, num_kv_heads, group, out, out_float);
}

}  // namespace oscar::cuda
