#pragma once
// Random KV page contents for kernel tests and benchmarks (kv_noise.cu): never zeros, always
// finite. Full-precision pages: bf16 uniform in [-1, 1]. Quantized pages: uniform random codes,
// f16/bf16 parameters with scale in [0.02, 0.1] and zero in [-0.3, -0.1] (q8: valid codes).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/device_kv_pages.h"
#include "kvcache/page_layout.h"

namespace oscar::cuda {

void launch_fill_kv_noise(const PageLayout& layout, std::byte* full_pages, int64_t full_page_count,
                          std::byte* quantized_pages, int64_t quantized_page_count, uint64_t seed,
                          cudaStream_t stream);

// Every page of one layer of `pages` (`capacity` pages of each kind): the full and quantized pages
// from `seed`, the band's (in `band_layout`) from ~seed.
void launch_fill_kv_noise(const DeviceKvPages& pages, int64_t layer, const PageLayout& layout,
                          const PageLayout& band_layout, const KvPageCounts& capacity,
                          uint64_t seed, cudaStream_t stream);

}  // namespace oscar::cuda
