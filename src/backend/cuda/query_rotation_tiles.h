#pragma once
// R_K as the tensor-core prefill kernel multiplies a block's queries by it (prefill_attention.cu):
// for each KV head the transpose R^T [n][k], split into its bf16 rounding and the bf16 rounding of
// the rest, so that high + low holds each entry to about 2^-16 of it.
#include <cstdint>
#include <vector>

namespace oscar::cuda {

// `rotations`: [kv_heads][d][d] (R[k][n], rows k). Returns [kv_heads][2 (high, low)][d (n)][d (k)]
// bf16 bits.
std::vector<uint16_t> query_rotation_tiles(const std::vector<float>& rotations, int64_t d);

}  // namespace oscar::cuda
