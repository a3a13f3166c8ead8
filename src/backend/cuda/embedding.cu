// Token embedding. Mirrors the embedding copy at the start of CpuBackend::forward
// (backend/cpu/cpu_backend.cpp): the residual stream starts as the float value of the bf16 row.
// With a vocab-parallel embedding the table holds rows [first_token, first_token + table_rows) and
// a token outside them gives a zero row (the all-reduce that follows fills it).
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/layer_kernels.h"

namespace oscar::cuda {
namespace {

__global__ void embedding_kernel(const int32_t* tokens, const __nv_bfloat16* embedding,
                                 int64_t first_token, int64_t table_rows, int64_t hidden_size,
                                 float* hidden) {
  const int64_t row = blockIdx.x;
  const int64_t local = int64_t(tokens[row]) - first_token;
  if (local < 0 || local >= table_rows) {
    for (int64_t i = threadIdx.x; i < hidden_size; i += blockDim.x)
      hidden[row * hidden_size + i] = 0;
    return;
  }
  const __nv_bfloat16* source = embedding + local * hidden_size;
  for (int64_t i = threadIdx.x; i < hidden_size; i += blockDim.x) {
    hidden[row * hidden_size + i] = __bfloat162float(source[i]);
  }
}

}  // namespace

void launch_embedding(const int32_t* tokens, int64_t rows, const __nv_bfloat16* embedding,
                      int64_t first_token, int64_t table_rows, int64_t hidden_size, float* hidden,
                      cudaStream_t stream) {
  if (rows == 0) return;
  embedding_kernel<<<unsigned(rows), 256, 0, stream>>>(tokens, embedding, first_token, table_rows,
                                                       hidden_size, hidden);
  check_launch("embedding_kernel");
}

}  // namespace oscar::cuda
