#pragma once
// The CUDA backend (Hopper, sm_90a): the same model, cache formats and decode rule as the CPU
// reference, with the KV cache and weights in GPU memory.
#include <cstdint>
#include <memory>

#include "backend/backend.h"

namespace oscar {

struct ModelWeights;
struct KvRotations;

int cuda_device_count();   // 0 when no driver or device is present
int64_t cuda_free_bytes();  // free memory of the current device

std::unique_ptr<Backend> make_cuda_backend(const ModelWeights& weights, const BackendOptions& options,
                                           const KvRotations* rotations);

// Benchmarks only: fills every KV page of a CUDA backend with random finite contents (bf16 values
// in [-1, 1]; random codes with plausible parameters), so that decode steps can be timed at long
// contexts without prefilling them. Throws when `backend` is not a CUDA backend.
void fill_kv_cache_with_noise(Backend& backend, uint64_t seed);

}  // namespace oscar
