#include "backend/cuda/device_kv_pages.h"

namespace oscar::cuda {

DeviceKvPages::DeviceKvPages(const PageLayout& layout, int64_t num_layers, KvPageCounts capacity)
    : full_layer_bytes_(capacity.full * layout.full_page_bytes),
      quantized_layer_bytes_(layout.bits > 0 ? capacity.quantized * layout.quantized_page_bytes : 0) {
  full_.resize(size_t(num_layers * full_layer_bytes_));
  quantized_.resize(size_t(num_layers * quantized_layer_bytes_));
  if (full_.bytes() > 0) check(cudaMemset(full_.data(), 0, full_.bytes()), "cudaMemset(full KV pages)");
  if (quantized_.bytes() > 0) {
    check(cudaMemset(quantized_.data(), 0, quantized_.bytes()), "cudaMemset(quantized KV pages)");
  }
}

}  // namespace oscar::cuda
