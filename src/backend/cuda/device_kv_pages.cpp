#include "backend/cuda/device_kv_pages.h"

#include <tuple>

namespace oscar::cuda {

DeviceKvPages::DeviceKvPages(const PageLayout& layout, int64_t num_layers, KvPageCounts capacity)
    : full_layer_bytes_(capacity.full * layout.full_page_bytes),
      quantized_layer_bytes_(layout.bits > 0 ? capacity.quantized * layout.quantized_page_bytes
                                             : 0),
      band_layer_bytes_(capacity.band * layout.band_page_bytes) {
  for (auto [arena, layer_bytes, what] :
       {std::tuple{&full_, full_layer_bytes_, "cudaMemset(full KV pages)"},
        std::tuple{&quantized_, quantized_layer_bytes_, "cudaMemset(quantized KV pages)"},
        std::tuple{&band_, band_layer_bytes_, "cudaMemset(band KV pages)"}}) {
    arena->resize(size_t(num_layers * layer_bytes));
    if (arena->bytes() > 0) check(cudaMemset(arena->data(), 0, arena->bytes()), what);
  }
}

}  // namespace oscar::cuda
