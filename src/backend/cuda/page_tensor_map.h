#pragma once
// Tensor maps (Hopper's bulk tensor copies, TMA) over an arena of full-precision pages: the arena
// viewed as rows of head_dim bf16, row ((page * 2 + part) * num_kv_heads + kv_head) *
// page_size_tokens + slot (part 0 keys, 1 values: PageLayout's full-page order), copied in boxes
// of 64 channels x kPageTensorMapRows rows into shared memory with the 128-byte swizzle.
#include <cuda.h>

#include <cstddef>
#include <cstdint>

#include "kvcache/page_layout.h"

namespace oscar::cuda {

// Rows of one box: the smallest page size the CUDA backend takes, so a box never spans two pages.
inline constexpr int kPageTensorMapRows = 16;

// The map of `page_count` pages (at least one) of `layout` at `arena`.
CUtensorMap make_page_tensor_map(const std::byte* arena, int64_t page_count,
                                 const PageLayout& layout);

}  // namespace oscar::cuda
