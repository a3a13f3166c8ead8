// The write of the new tokens' keys and values. Mirrors the key/query rotation in
// CpuBackend::attention_block (rotate_rows, backend/cpu/cpu_math.cpp: out[j] = sum_i x[i] R[i][j] as
// one fma chain over i) and CpuKvStore::write_full (backend/cpu/cpu_kv_store.cpp: bf16 rows into the
// token's slot of its full-precision page). Values are not rotated here: R_V is folded into W_v.
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/layer_kernels.h"
#include "backend/cuda/warp_primitives.cuh"

namespace oscar::cuda {
namespace {

constexpr int kHeadDim = 128;
constexpr int kMaxGroup = 8;
constexpr int kRotationBytes = kHeadDim * kHeadDim * 4;

// One block per (tile of `rows_per_block` rows, KV head), thread j = channel. R_K, when the cache
// rotates keys, is copied into dynamic shared memory first with every copy in flight at once
// (reading it from global memory one row per loop step waited on the memory latency 128 times),
// then serves the tile's rows: the key and the group's query heads of each.
__global__ void kv_write_kernel(const KvWriteArgs args, int rows, int rows_per_block) {
  extern __shared__ __align__(16) float rotation[];  // [D][D], only when rotating
  __shared__ float vectors[kMaxGroup + 1][kHeadDim];  // key, then the group's queries
  const int kv_head = blockIdx.y, j = threadIdx.x;
  const int group = args.num_heads / args.num_kv_heads;
  const bool rotates = args.key_rotations != nullptr;
  if (rotates) {
    const auto* source = reinterpret_cast<const std::byte*>(args.key_rotations + int64_t(kv_head) * kHeadDim * kHeadDim);
    const uint32_t base = shared_address(rotation);
    for (int chunk = j; chunk < kRotationBytes / 16; chunk += kHeadDim) cp_async_16(base + chunk * 16, source + chunk * 16);
    cp_async_commit();
  }
  const PageLayout& layout = args.layout;
  const int first = blockIdx.x * rows_per_block;
  for (int row = first; row < min(rows, first + rows_per_block); ++row) {
    const float* source = args.qkv + int64_t(row) * args.row_stride;
    __syncthreads();  // the previous row's vectors are read
    vectors[0][j] = source[int64_t(args.num_heads + kv_head) * kHeadDim + j];
    for (int g = 0; g < group; ++g) vectors[1 + g][j] = source[int64_t(kv_head * group + g) * kHeadDim + j];
    if (rotates) cp_async_wait<0>();
    __syncthreads();
    float out[kMaxGroup + 1];
#pragma unroll
    for (int v = 0; v <= kMaxGroup; ++v) out[v] = v <= group ? vectors[v][j] : 0.0f;
    if (rotates) {
#pragma unroll
      for (int v = 0; v <= kMaxGroup; ++v) out[v] = 0.0f;
#pragma unroll 8
      for (int i = 0; i < kHeadDim; ++i) {
        const float r = rotation[i * kHeadDim + j];
#pragma unroll
        for (int v = 0; v <= kMaxGroup; ++v) {
          if (v <= group) out[v] = fmaf(vectors[v][i], r, out[v]);
        }
      }
    }
    const QueryRow q = args.rows[row];
    const PageIds ids = args.page_table[q.page_table + q.position / layout.page_size_tokens];
    const int slot = q.position % layout.page_size_tokens;
    std::byte* page = args.full_pages + int64_t(ids.full) * layout.full_page_bytes;
    const float value = source[int64_t(args.num_heads + args.num_kv_heads + kv_head) * kHeadDim + j];
    reinterpret_cast<__nv_bfloat16*>(page + layout.full_key_offset(kv_head, slot))[j] = __float2bfloat16_rn(out[0]);
    reinterpret_cast<__nv_bfloat16*>(page + layout.full_value_offset(kv_head, slot))[j] = __float2bfloat16_rn(value);
    float* queries = args.rotated_queries + int64_t(row) * args.num_heads * kHeadDim;
#pragma unroll
    for (int g = 0; g < kMaxGroup; ++g) {
      if (g < group) queries[int64_t(kv_head * group + g) * kHeadDim + j] = out[1 + g];
    }
  }
}

}  // namespace

void launch_kv_write(const KvWriteArgs& args, int64_t rows, cudaStream_t stream) {
  if (rows == 0) return;
  const int shared_bytes = args.key_rotations != nullptr ? kRotationBytes : 0;
  check(cudaFuncSetAttribute(kv_write_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kRotationBytes),
        "cudaFuncSetAttribute(kv_write)");
  // Decode steps: a block per row, for parallelism; prefill chunks: eight rows share a copy of R_K.
  const int rows_per_block = rows <= 64 ? 1 : 8;
  const dim3 grid(unsigned((rows + rows_per_block - 1) / rows_per_block), unsigned(args.num_kv_heads));
  kv_write_kernel<<<grid, kHeadDim, unsigned(shared_bytes), stream>>>(args, int(rows), rows_per_block);
  check_launch("kv_write_kernel");
}

}  // namespace oscar::cuda
