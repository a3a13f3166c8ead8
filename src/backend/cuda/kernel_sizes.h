#pragma once
// The head size every CUDA kernel is compiled for (Qwen3's and Llama's); CudaBackend refuses a
// model with another at load time.

namespace oscar::cuda {

inline constexpr int kHeadDim = 128;

}  // namespace oscar::cuda
