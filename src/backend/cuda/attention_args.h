#pragma once
// What the attention kernels read: one layer's page arenas (indexed through PageLayout), the step's
// work records (step_work.h) and queries, and where partial results go. A partial record of
// `group` query heads is [max[group], sum[group], output[group][head_dim]] floats: the running
// max of the scores (log2 units), the sum of 2^(score - max) and the unnormalised weighted values.
#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/step_work.h"
#include "kvcache/page_layout.h"

namespace oscar::cuda {

struct AttentionArgs {
  PageLayout layout;
  int64_t sink_tokens = 0;
  const std::byte* full_pages = nullptr;       // this layer's full-precision arena
  const std::byte* quantized_pages = nullptr;  // this layer's quantized arena (may be null)
  PageLayout band_layout;                      // of the band's pages (make_band_layout)
  const std::byte* band_pages = nullptr;       // this layer's band arena (null without a band)
  const QueryRow* rows = nullptr;
  const PageIds* page_table = nullptr;
  const StepCounts* counts = nullptr;  // device copy of the step's counts
  const DecodeItem* decode_items = nullptr;
  const BlockItem* block_items = nullptr;
  // The tensor-core prefill kernel's bf16 view of the prefilling sequences' keys: for each logical
  // page, the full-precision page in `full_pages` and the dequantized 2-bit and band pages in
  // `scratch_pages` (laid out as full-precision pages; step_plan.h).
  const PageIds* prefill_pages = nullptr;
  const std::byte* scratch_pages = nullptr;
  const float* queries = nullptr;  // [rows][num_heads][head_dim], rotated like the stored keys
  // The tensor-core prefill kernel's queries when given (else `queries`): the q part of the step's
  // q|k|v rows after RoPE, row r's head h at prefill_queries[r * prefill_query_stride + h * D], not
  // rotated; the kernel rotates them by R_K given as query_rotation_tiles.h's bf16 parts (null: the
  // keys are not rotated).
  const float* prefill_queries = nullptr;
  int64_t prefill_query_stride = 0;
  const __nv_bfloat16* query_rotation_tiles = nullptr;
  float* partials = nullptr;
  // The tensor-core prefill kernel's items hold each of their rows whole (one partial record), so
  // the kernel writes those rows' normalised output itself, [rows][num_heads][head_dim], as bf16
  // and, when given, as float; their combine tasks count no records.
  __nv_bfloat16* output = nullptr;
  float* output_float = nullptr;
  int num_kv_heads = 0;
  int group = 0;          // query heads per KV head
  float score_scale = 0;  // log2(e) / sqrt(head_dim): scores in log2 units
  const float* q8_scales = nullptr;
};

constexpr int64_t partial_record_floats(int group, int64_t head_dim) {
  return group * (head_dim + 2);
}

}  // namespace oscar::cuda
