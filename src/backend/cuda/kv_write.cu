// The write of the new tokens' keys and values. Mirrors the key/query rotation in
// CpuBackend::attention_block (rotate_rows, backend/cpu/cpu_math.cpp: out[j] = sum_i x[i] R[i][j] as
// one fma chain over i) and CpuKvStore::write_full (backend/cpu/cpu_kv_store.cpp: bf16 rows into the
// token's slot of its full-precision page). Values are not rotated here: R_V is folded into W_v.
#include "backend/cuda/chained_launch.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/layer_kernels.h"
#include "backend/cuda/warp_primitives.cuh"

namespace oscar::cuda {
namespace {

constexpr int kHeadDim = 128;
constexpr int kMaxGroup = 8;
constexpr int kThreads = 128;
// Each block writes one slice of 32 channels (columns of R_K): a decode step's few rows spread over
// four times the blocks, each copying a quarter of R_K (16 KB) and running shorter chains.
constexpr int kSliceChannels = 32;
constexpr int kSlices = kHeadDim / kSliceChannels;
constexpr int kVectorSlots = kThreads / kSliceChannels;  // threads per channel, each its vectors
constexpr int kRotationSliceBytes = kHeadDim * kSliceChannels * 4;

// One block per (tile of `rows_per_block` rows, KV head, slice of 32 channels); thread j takes
// channel slice * 32 + j % 32 of the vectors v = j / 32, j / 32 + 4, ... of a row (v = 0: the key,
// 1..group: the group's queries), each one fma chain over i as on the CPU. R_K's 32 columns, when
// the cache rotates keys, are copied into shared memory first with every copy in flight at once
// (reading R_K one row per loop step from global memory waited on the memory latency 128 times).
__global__ void kv_write_kernel(const KvWriteArgs args, int rows, int rows_per_block) {
  __shared__ __align__(16) float rotation[kHeadDim][kSliceChannels];  // used only when rotating
  __shared__ float vectors[kMaxGroup + 1][kHeadDim];                  // key, then the group's queries
  const int kv_head = blockIdx.y, slice = blockIdx.z, j = threadIdx.x;
  const int column = j % kSliceChannels, channel = slice * kSliceChannels + column;
  const int slot = j / kSliceChannels;
  const int group = args.num_heads / args.num_kv_heads;
  const bool rotates = args.key_rotations != nullptr;
  if (rotates) {
    // Row i of the slice: 128 bytes of row i of R_K from column slice * 32, eight 16-byte copies.
    const float* source = args.key_rotations + int64_t(kv_head) * kHeadDim * kHeadDim + slice * kSliceChannels;
    const uint32_t base = shared_address(&rotation[0][0]);
    for (int chunk = j; chunk < kRotationSliceBytes / 16; chunk += kThreads) {
      const int i = chunk / 8, part = chunk % 8;
      cp_async_16(base + chunk * 16, source + i * kHeadDim + part * 4);
    }
    cp_async_commit();
  }
  wait_for_producer();
  release_consumer();
  const PageLayout& layout = args.layout;
  const int first = blockIdx.x * rows_per_block;
  for (int row = first; row < min(rows, first + rows_per_block); ++row) {
    // Every global load of the row is issued before anything waits on one: the key, the group's
    // queries, this thread's value channel and the page lookup (two dependent loads) each took a
    // round trip of their own, most of a decode step's write time.
    const float* source = args.qkv + int64_t(row) * args.row_stride;
    const float key_in = source[int64_t(args.num_heads + kv_head) * kHeadDim + j];
    float queries_in[kMaxGroup];
#pragma unroll
    for (int g = 0; g < kMaxGroup; ++g) {
      queries_in[g] = g < group ? source[int64_t(kv_head * group + g) * kHeadDim + j] : 0.0f;
    }
    const float value = source[int64_t(args.num_heads + args.num_kv_heads + kv_head) * kHeadDim + channel];
    const QueryRow q = args.rows[row];
    const PageIds ids = args.page_table[q.page_table + q.position / layout.page_size_tokens];
    __syncthreads();  // the previous row's vectors are read
    vectors[0][j] = key_in;
#pragma unroll
    for (int g = 0; g < kMaxGroup; ++g) {
      if (g < group) vectors[1 + g][j] = queries_in[g];
    }
    if (rotates) cp_async_wait<0>();
    __syncthreads();
    constexpr int kVectorsPerThread = (kMaxGroup + kVectorSlots) / kVectorSlots;
    float out[kVectorsPerThread];
#pragma unroll
    for (int k = 0; k < kVectorsPerThread; ++k) {
      const int v = slot + k * kVectorSlots;
      out[k] = v <= group ? vectors[v][channel] : 0.0f;
    }
    if (rotates) {
#pragma unroll
      for (int k = 0; k < kVectorsPerThread; ++k) out[k] = 0.0f;
#pragma unroll 8
      for (int i = 0; i < kHeadDim; ++i) {
        const float r = rotation[i][column];
#pragma unroll
        for (int k = 0; k < kVectorsPerThread; ++k) {
          const int v = slot + k * kVectorSlots;
          if (v <= group) out[k] = fmaf(vectors[v][i], r, out[k]);
        }
      }
    }
    const int page_slot = q.position % layout.page_size_tokens;
    std::byte* page = args.full_pages + int64_t(ids.full) * layout.full_page_bytes;
    float* queries = args.rotated_queries + int64_t(row) * args.num_heads * kHeadDim;
#pragma unroll
    for (int k = 0; k < kVectorsPerThread; ++k) {
      const int v = slot + k * kVectorSlots;
      if (v == 0) {
        reinterpret_cast<__nv_bfloat16*>(page + layout.full_key_offset(kv_head, page_slot))[channel] =
            __float2bfloat16_rn(out[k]);
        reinterpret_cast<__nv_bfloat16*>(page + layout.full_value_offset(kv_head, page_slot))[channel] =
            __float2bfloat16_rn(value);
      } else if (v <= group) {
        queries[int64_t(kv_head * group + v - 1) * kHeadDim + channel] = out[k];
      }
    }
  }
}

}  // namespace

void launch_kv_write(const KvWriteArgs& args, int64_t rows, cudaStream_t stream) {
  if (rows == 0) return;
  // Decode steps: a block per row, for parallelism; prefill chunks: eight rows share a copy of R_K.
  const int rows_per_block = rows <= 64 ? 1 : 8;
  const dim3 grid(unsigned((rows + rows_per_block - 1) / rows_per_block), unsigned(args.num_kv_heads), kSlices);
  launch_chained("kv_write_kernel", kv_write_kernel, grid, dim3(kThreads), 0, stream, args, int(rows), rows_per_block);
}

}  // namespace oscar::cuda
