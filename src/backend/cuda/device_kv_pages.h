#pragma once
// The KV cache in GPU memory: per layer, one arena of full-precision pages, one of quantized pages
// and one of band pages, holding exactly the bytes CpuKvStore holds on the host
// (kvcache/page_layout.h). The arenas are zeroed once: the attention kernels load whole 16-token
// tiles and mask the slots past a sequence's end, which must therefore hold finite values even
// before anything was written.
#include <cstddef>
#include <cstdint>

#include "backend/cuda/device_buffer.h"
#include "kvcache/page_layout.h"

namespace oscar::cuda {

class DeviceKvPages {
 public:
  DeviceKvPages(const PageLayout& layout, int64_t num_layers, KvPageCounts capacity);

  std::byte* full(int64_t layer) const { return full_.data() + layer * full_layer_bytes_; }
  // Null when the cache holds no quantized pages.
  std::byte* quantized(int64_t layer) const {
    return quantized_layer_bytes_ == 0 ? nullptr
                                       : quantized_.data() + layer * quantized_layer_bytes_;
  }
  // Null when the cache has no band.
  std::byte* band(int64_t layer) const {
    return band_layer_bytes_ == 0 ? nullptr : band_.data() + layer * band_layer_bytes_;
  }
  int64_t full_layer_bytes() const { return full_layer_bytes_; }
  int64_t quantized_layer_bytes() const { return quantized_layer_bytes_; }
  int64_t band_layer_bytes() const { return band_layer_bytes_; }
  size_t bytes() const { return full_.bytes() + quantized_.bytes() + band_.bytes(); }

 private:
  int64_t full_layer_bytes_ = 0;
  int64_t quantized_layer_bytes_ = 0;
  int64_t band_layer_bytes_ = 0;
  DeviceBuffer<std::byte> full_;
  DeviceBuffer<std::byte> quantized_;
  DeviceBuffer<std::byte> band_;
};

}  // namespace oscar::cuda
