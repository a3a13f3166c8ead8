#pragma once
// Tensor maps (Hopper's bulk tensor copies, TMA) over an arena of full-precision pages: the arena
// viewed as rows of head_dim bf16, row ((page * 2 + part) * num_kv_heads + kv_head) *
// page_size_tokens + slot (part 0 keys, 1 values: PageLayout's full-page order), copied in boxes
// of 64 channels x page_tensor_map_rows() rows into shared memory with the 128-byte swizzle.
#include <cuda.h>

#include <cstddef>
#include <cstdint>

#include "kvcache/page_layout.h"

namespace oscar::cuda {

// Rows of one box: 64 where the page size is a multiple of 64, else 16 (the smallest page size the
// CUDA backend takes), so that a box never spans two pages. Larger boxes mean fewer copies to
// issue.
inline constexpr int kPageTensorMapRows = 16;
inline constexpr int kLargePageTensorMapRows = 64;
inline int page_tensor_map_rows(const PageLayout& layout) {
  return layout.page_size_tokens % kLargePageTensorMapRows == 0 ? kLargePageTensorMapRows
                                                                : kPageTensorMapRows;
}

// The map of `page_count` pages (at least one) of `layout` at `arena`.
CUtensorMap make_page_tensor_map(const std::byte* arena, int64_t page_count,
                                 const PageLayout& layout);

}  // namespace oscar::cuda
