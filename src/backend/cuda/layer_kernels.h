#pragma once
// Launchers of the per-layer kernels around attention (one .cu file each, each naming the CPU
// function it mirrors). Plain C++ declarations: cuda_backend.cpp and the tests call them.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/step_work.h"
#include "kvcache/page_layout.h"

namespace oscar::cuda {

// embedding.cu: hidden[r] = float(embedding[tokens[r] - first_token]), or zeros when the token lies
// outside the table's rows [first_token, first_token + table_rows) (a vocab-parallel share).
void launch_embedding(const int32_t* tokens, int64_t rows, const __nv_bfloat16* embedding,
                      int64_t first_token, int64_t table_rows, int64_t hidden_size, float* hidden,
                      cudaStream_t stream);

// rms_norm.cu: for each output row i (source row `row_map[i]`, or i when row_map is null):
// hidden[src] += delta[src] when delta is given, then out[i] = bf16(weight * hidden *
// rsqrt(mean+eps)).
void launch_add_rms_norm(float* hidden, const float* delta, const int32_t* row_map, int64_t rows,
                         int64_t width, const float* weight, float eps, __nv_bfloat16* out,
                         cudaStream_t stream);

// swiglu.cu: out[r][i] = bf16(silu(gate_up[r][gate_column(i)]) * gate_up[r][up_column(i)])
// (gate_up_layout.h).
void launch_swiglu(const float* gate_up, int64_t rows, int64_t inner, __nv_bfloat16* out,
                   cudaStream_t stream);

// qk_norm_rope.cu: in place on the q and k parts of each row of `qkv` ([q heads][k heads][v heads]
// of head_dim floats): per-head RMSNorm (when weights are given), then RoPE at the row's position.
struct QkNormRopeArgs {
  float* qkv = nullptr;
  int64_t row_stride = 0;  // floats
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  const QueryRow* rows = nullptr;
  const float* q_norm = nullptr;  // null: no q/k norm (Llama)
  const float* k_norm = nullptr;
  float eps = 0;
  const float* inverse_frequencies = nullptr;  // head_dim / 2
};
void launch_qk_norm_rope(const QkNormRopeArgs& args, int64_t rows, cudaStream_t stream);

// kv_write.cu: the new tokens' keys rotated by R_K (when given) and values, as bf16, into their
// slots of the full-precision pages; the queries rotated by the same R_K into `rotated_queries`,
// unless `write_queries` is false and the step has more than 64 rows (a prefill step whose
// attention, the tensor-core kernel, reads and rotates the queries itself).
struct KvWriteArgs {
  const float* qkv = nullptr;
  int64_t row_stride = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  const QueryRow* rows = nullptr;
  const PageIds* page_table = nullptr;
  PageLayout layout;
  std::byte* full_pages = nullptr;
  const float* key_rotations = nullptr;  // [num_kv_heads][D][D] of this layer, or null
  float* rotated_queries = nullptr;      // [rows][num_heads][D]
  bool write_queries = true;
};
void launch_kv_write(const KvWriteArgs& args, int64_t rows, cudaStream_t stream);

// kv_migrate.cu: tokens leaving the recent window, quantized from their full-precision pages into
// quantized pages (per-token groups; KIVI keys per channel over position-aligned token groups), in
// `num_layers` consecutive layers whose arenas lie `*_layer_bytes` apart (DeviceKvPages). With
// `band`, the band's 4-bit copies instead: `layout` and `quantized_pages` are the band's, the page
// ids PageIds::band and the task count StepCounts::band_migrate_tasks.
struct KvMigrateArgs {
  PageLayout layout;
  bool band = false;
  const std::byte* full_pages = nullptr;  // the first layer's arenas
  std::byte* quantized_pages = nullptr;
  int num_layers = 1;
  int64_t full_layer_bytes = 0;
  int64_t quantized_layer_bytes = 0;
  const PageIds* page_table = nullptr;
  const MigrateTask* tasks = nullptr;
  const KeyGroupTask* key_groups = nullptr;
  const StepCounts* counts = nullptr;
  int num_kv_heads = 0;
  float clip_ratio_k = 1;
  float clip_ratio_v = 1;
  bool clip_search = false;
  // The published quantizer (quant/published_quantizer.h): row_quantile clamps each token's row
  // at a quantile of its magnitudes before plain min/max per group; lloyd_max (INT2, per-token
  // rows, no error feedback) takes the codes by the Lloyd-Max thresholds of the clamped row.
  ClipMode clip_mode = ClipMode::range_scale;
  bool lloyd_max = false;
  const float* q8_scales = nullptr;
  // OSCAR keys and values rounded with error feedback (quant/error_feedback.h): the factors of
  // the first layer's KV heads, then the next layer's ([layers][kv_heads][D][D]); null: nearest
  // rounding.
  const float* key_feedback = nullptr;
  const float* value_feedback = nullptr;
};
// `max_tasks` / `max_key_groups`: host-side bounds of the device counts (for the grid).
void launch_kv_migrate(const KvMigrateArgs& args, int64_t max_tasks, int64_t max_key_groups,
                       cudaStream_t stream);

}  // namespace oscar::cuda
