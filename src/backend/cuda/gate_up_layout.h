#pragma once
// Where the fused gate|up product puts gate_proj's and up_proj's outputs: interleaved in groups of
// four, gate 2k, gate 2k + 1, up 2k, up 2k + 1, so that every block of the few-rows product
// (skinny_linear.cu: 4 or 16 outputs) holds both factors of the SwiGLU pairs it computes and
// applies SwiGLU itself, without a kernel of its own. The weights are uploaded in this row order
// (device_weights.cpp), and the separate SwiGLU kernel of cuBLAS's larger products reads it.
#include <cstdint>

namespace oscar::cuda {

// Output column of the product holding gate_proj's output i (i < intermediate size, which is even).
constexpr int64_t gate_column(int64_t i) {
  return i / 2 * 4 + i % 2;
}
// ... and up_proj's output i.
constexpr int64_t up_column(int64_t i) {
  return gate_column(i) + 2;
}
// Whether product column c holds a gate output; the pair i whose gate or up column c is.
constexpr bool is_gate_column(int64_t c) {
  return c % 4 < 2;
}
constexpr int64_t pair_of_column(int64_t c) {
  return c / 4 * 2 + c % 2;
}

}  // namespace oscar::cuda
