// Random KV page contents (kv_noise.h): a counter-based hash (splitmix64) per 32-bit word, so the
// fill is deterministic in the seed and needs no generator state.
#include <cuda_fp16.h>

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kv_noise.h"

namespace oscar::cuda {
namespace {

__device__ __forceinline__ uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

__device__ __forceinline__ float uniform(uint64_t bits, float lo, float hi) {
  return lo + (hi - lo) * float(bits >> 40) * (1.0f / 16777216.0f);
}

__device__ __forceinline__ uint16_t bf16_bits(float x) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(x));
}

__global__ void fill_full_kernel(uint32_t* words, int64_t count, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    const uint64_t r = splitmix64(seed ^ uint64_t(i));
    words[i] = uint32_t(bf16_bits(uniform(r, -1.f, 1.f))) |
               (uint32_t(bf16_bits(uniform(r << 24, -1.f, 1.f))) << 16);
  }
}

// One 32-bit word of a quantized page: codes anywhere, a (scale, zero) pair in the parameter
// sections.
__global__ void fill_quantized_kernel(const PageLayout layout, uint32_t* words, int64_t count,
                                      uint64_t seed) {
  const int64_t page_words = layout.quantized_page_bytes / 4;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    const uint64_t r = splitmix64(seed ^ uint64_t(i));
    const int64_t byte = (i % page_words) * 4;
    const bool params = (byte >= layout.key_params_offset && byte < layout.value_codes_offset) ||
                        byte >= layout.value_params_offset;
    if (!params) {
      words[i] = uint32_t(r);
      continue;
    }
    const float scale = uniform(r, 0.02f, 0.1f), zero = uniform(r << 24, -0.3f, -0.1f);
    if (layout.param_format == ParamFormat::q8) {
      // Two (exponent, zero) byte pairs: exponents near 2^-5, zeros in -60..-20.
      const uint32_t e0 = 84 + uint32_t(r & 7), e1 = 84 + uint32_t((r >> 3) & 7);
      const uint32_t z0 = uint8_t(int8_t(-20 - int((r >> 6) % 40))),
                     z1 = uint8_t(int8_t(-20 - int((r >> 12) % 40)));
      words[i] = e0 | (z0 << 8) | (e1 << 16) | (z1 << 24);
    } else if (layout.param_format == ParamFormat::f32) {  // (scale, zero) pairs of two words
      words[i] = __float_as_uint(byte % 8 == 0 ? scale : zero);
    } else if (layout.param_format == ParamFormat::f16) {
      words[i] = uint32_t(__half_as_ushort(__float2half_rn(scale))) |
                 (uint32_t(__half_as_ushort(__float2half_rn(zero))) << 16);
    } else {
      words[i] = uint32_t(bf16_bits(scale)) | (uint32_t(bf16_bits(zero)) << 16);
    }
  }
}

unsigned blocks_for(int64_t count) {
  return unsigned(std::clamp<int64_t>((count + 255) / 256, 1, 8192));
}

}  // namespace

void launch_fill_kv_noise(const PageLayout& layout, std::byte* full_pages, int64_t full_page_count,
                          std::byte* quantized_pages, int64_t quantized_page_count, uint64_t seed,
                          cudaStream_t stream) {
  const int64_t full_words = full_page_count * layout.full_page_bytes / 4;
  if (full_words > 0) {
    fill_full_kernel<<<blocks_for(full_words), 256, 0, stream>>>(
        reinterpret_cast<uint32_t*>(full_pages), full_words, seed);
    check_launch("fill_full_kernel");
  }
  const int64_t quantized_words = quantized_page_count * layout.quantized_page_bytes / 4;
  if (layout.bits > 0 && quantized_words > 0) {
    fill_quantized_kernel<<<blocks_for(quantized_words), 256, 0, stream>>>(
        layout, reinterpret_cast<uint32_t*>(quantized_pages), quantized_words,
        seed ^ 0x5bd1e995ull);
    check_launch("fill_quantized_kernel");
  }
}

void launch_fill_kv_noise(const DeviceKvPages& pages, int64_t layer, const PageLayout& layout,
                          const PageLayout& band_layout, const KvPageCounts& capacity,
                          uint64_t seed, cudaStream_t stream) {
  launch_fill_kv_noise(layout, pages.full(layer), capacity.full, pages.quantized(layer),
                       layout.bits > 0 ? capacity.quantized : 0, seed, stream);
  if (pages.band(layer) != nullptr) {
    launch_fill_kv_noise(band_layout, nullptr, 0, pages.band(layer), capacity.band, ~seed, stream);
  }
}

}  // namespace oscar::cuda
