#include "backend/cuda/page_tensor_map.h"

#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include "backend/cuda/cuda_check.h"
#include "util/error.h"

namespace oscar::cuda {
namespace {

// The driver's encoder, found through the runtime (no link against libcuda).
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 encoder = [] {
    void* function = nullptr;
    cudaDriverEntryPointQueryResult found{};
    check(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &function, 12000,
                                           cudaEnableDefault, &found),
          "cudaGetDriverEntryPointByVersion(cuTensorMapEncodeTiled)");
    require(found == cudaDriverEntryPointSuccess && function != nullptr,
            "the CUDA driver has no cuTensorMapEncodeTiled (Hopper's bulk tensor copies)");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(function);
  }();
  return encoder;
}

}  // namespace

CUtensorMap make_page_tensor_map(const std::byte* arena, int64_t page_count,
                                 const PageLayout& layout) {
  require(layout.element_bytes == 2 && layout.head_dim == 128 &&
              layout.page_size_tokens % kPageTensorMapRows == 0,
          "page tensor map: bf16 pages of head_dim 128 and a multiple of {} tokens, got {}-byte "
          "elements, head_dim "
          "{}, {} tokens",
          kPageTensorMapRows, layout.element_bytes, layout.head_dim, layout.page_size_tokens);
  require(page_count >= 1, "page tensor map: no pages");
  const cuuint64_t dims[2] = {
      cuuint64_t(layout.head_dim),
      cuuint64_t(page_count * 2 * layout.num_kv_heads * layout.page_size_tokens)};
  const cuuint64_t strides[1] = {cuuint64_t(layout.head_dim * layout.element_bytes)};
  const cuuint32_t box[2] = {64, cuuint32_t(page_tensor_map_rows(layout))};
  const cuuint32_t element_strides[2] = {1, 1};
  CUtensorMap map{};
  const CUresult result = tensor_map_encoder()(
      &map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<std::byte*>(arena), dims, strides, box,
      element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  require(result == CUDA_SUCCESS, "cuTensorMapEncodeTiled failed ({}) for {} pages at {}",
          int(result), page_count, static_cast<const void*>(arena));
  return map;
}

}  // namespace oscar::cuda
