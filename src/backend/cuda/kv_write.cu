// The write of the new tokens' keys and values. Mirrors the key/query rotation in
// CpuBackend::attention_block (rotate_rows, backend/cpu/cpu_math.cpp: out[j] = sum_i x[i] R[i][j] as
// one fma chain over i) and CpuKvStore::write_full (backend/cpu/cpu_kv_store.cpp: bf16 rows into the
// token's slot of its full-precision page). Values are not rotated here: R_V is folded into W_v.
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/layer_kernels.h"

namespace oscar::cuda {
namespace {

constexpr int kHeadDim = 128;
constexpr int kMaxGroup = 8;

// One block per (row, KV head), thread j = channel: the key and the group's query heads share the
// block's reads of R_K.
__global__ void kv_write_kernel(const KvWriteArgs args) {
  __shared__ float vectors[kMaxGroup + 1][kHeadDim];  // key, then the group's queries
  const int row = blockIdx.x, kv_head = blockIdx.y, j = threadIdx.x;
  const int group = args.num_heads / args.num_kv_heads;
  const float* source = args.qkv + int64_t(row) * args.row_stride;
  vectors[0][j] = source[int64_t(args.num_heads + kv_head) * kHeadDim + j];
  for (int g = 0; g < group; ++g) vectors[1 + g][j] = source[int64_t(kv_head * group + g) * kHeadDim + j];
  __syncthreads();
  float out[kMaxGroup + 1];
#pragma unroll
  for (int v = 0; v <= kMaxGroup; ++v) out[v] = v <= group ? vectors[v][j] : 0.0f;
  if (args.key_rotations != nullptr) {
    const float* rotation = args.key_rotations + int64_t(kv_head) * kHeadDim * kHeadDim;
#pragma unroll
    for (int v = 0; v <= kMaxGroup; ++v) out[v] = 0.0f;
    for (int i = 0; i < kHeadDim; ++i) {
      const float r = rotation[i * kHeadDim + j];
#pragma unroll
      for (int v = 0; v <= kMaxGroup; ++v) {
        if (v <= group) out[v] = fmaf(vectors[v][i], r, out[v]);
      }
    }
  }
  const QueryRow q = args.rows[row];
  const PageLayout& layout = args.layout;
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

}  // namespace

void launch_kv_write(const KvWriteArgs& args, int64_t rows, cudaStream_t stream) {
  if (rows == 0) return;
  const dim3 grid(unsigned(rows), unsigned(args.num_kv_heads));
  kv_write_kernel<<<grid, kHeadDim, 0, stream>>>(args);
  check_launch("kv_write_kernel");
}

}  // namespace oscar::cuda
