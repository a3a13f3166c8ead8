// Flash-attention-style tiled attention (online softmax over key tiles, causal, GQA), float math.
// Mirrors cpu_attention (backend/cpu/cpu_attention.cpp) for blocks of query rows: the query at
// position t reads key j quantized iff sink <= j < quantized_end(t + 1) (from its band copy iff
// also j >= band_begin(t + 1)), and in full precision iff j <= t and (j < sink or
// j >= quantized_end(t + 1)), so a prefill chunk whose queries have different boundaries reads the
// keys of the overlap regions in each format, each query its own.
//
// One block per (block item, KV head), persistent over the step's items: 64 query rows (the
// item's tokens x the group's query heads) against 32-key tiles that 256 threads dequantize into
// shared memory as float (as CpuKvStore::read_full / read_quantized do), then scores (4 rows x
// 2 keys a thread), the online softmax (4 threads a row) and the weighted values (4 rows x 8
// channels a thread). Each key tile is visited once per format it is read in.
#include "backend/cuda/float_block_attention.h"

#include <cuda_bf16.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_codec.cuh"
#include "backend/cuda/kernel_sizes.h"
#include "backend/cuda/prefill_jobs.h"  // reads(): the decode rule for one (row, key) pair
#include "backend/cuda/warp_primitives.cuh"

namespace oscar::cuda {
namespace {

constexpr int kRows = 64;
constexpr int kKeys = 32;
constexpr int kThreads = 256;
constexpr int kKeyStride = kHeadDim + 4;  // padding spreads the lanes' float4 reads over the banks
constexpr int kWeightStride = kKeys + 1;

struct Shared {
  float query[kRows][kHeadDim];  // scaled by log2(e) / sqrt(D)
  float keys[kKeys][kKeyStride];
  float values[kKeys][kKeyStride];
  float weights[kRows][kWeightStride];
  float max[kRows];
  float sum[kRows];
  float correction[kRows];
  int position[kRows];  // -1 for rows past the item's tokens
  int quantized_end[kRows];
  int band_begin[kRows];
};

__device__ __forceinline__ void load_bf16x16(const std::byte* source, float* out) {
  const uint4* words = reinterpret_cast<const uint4*>(source);
#pragma unroll
  for (int w = 0; w < 2; ++w) unpack_bf16x8(words[w], out + 8 * w);
}

// Sixteen channels [first, first + 16) of one token of one KV head, dequantized like
// CpuKvStore::read_quantized: x = code * scale + zero.
__device__ void load_quantized_x16(const PageLayout& layout, const float* q8_scales,
                                   const std::byte* page, int kv_head, int slot, int first,
                                   float* keys, float* values) {
  const int bits = layout.bits;
  const auto* key_codes = reinterpret_cast<const uint8_t*>(page + layout.key_codes(kv_head, slot));
  const auto* value_codes =
      reinterpret_cast<const uint8_t*>(page + layout.value_codes(kv_head, slot));
  const int group = first / int(layout.group_size);
  const DeviceParams value_params = load_params(
      reinterpret_cast<const uint8_t*>(page + layout.value_params(kv_head, slot, group)),
      layout.param_format, q8_scales);
  DeviceParams key_params{};
  if (!layout.keys_per_channel) {
    key_params = load_params(
        reinterpret_cast<const uint8_t*>(page + layout.key_params(kv_head, slot, group)),
        layout.param_format, q8_scales);
  }
#pragma unroll 4
  for (int i = 0; i < 16; ++i) {
    const int ch = first + i;
    values[i] = float(code_at(value_codes, ch, bits)) * value_params.scale + value_params.zero;
    if (layout.keys_per_channel) {
      key_params =
          load_params(reinterpret_cast<const uint8_t*>(page + layout.key_params(kv_head, slot, ch)),
                      layout.param_format, q8_scales);
    }
    keys[i] = float(code_at(key_codes, ch, bits)) * key_params.scale + key_params.zero;
  }
}

__device__ void load_tile(const AttentionArgs& a, Shared& s, const BlockItem& item, int page_table,
                          int kv_head, int tile, KeyPages kind) {
  const PageLayout& layout = a.layout;
  const int key = threadIdx.x / 8, first = (threadIdx.x % 8) * 16;
  const int position = tile + key;
  float k[16], v[16];
#pragma unroll
  for (int i = 0; i < 16; ++i) k[i] = v[i] = 0.0f;
  if (position >= item.key_begin && position < item.key_end) {
    const PageIds ids = a.page_table[page_table + position / layout.page_size_tokens];
    const int slot = position % layout.page_size_tokens;
    if (kind == KeyPages::full && ids.full >= 0) {
      const std::byte* page = a.full_pages + int64_t(ids.full) * layout.full_page_bytes;
      load_bf16x16(page + layout.full_key_offset(kv_head, slot) + first * 2, k);
      load_bf16x16(page + layout.full_value_offset(kv_head, slot) + first * 2, v);
    } else if (kind == KeyPages::quantized && ids.quantized >= 0) {
      const std::byte* page =
          a.quantized_pages + int64_t(ids.quantized) * layout.quantized_page_bytes;
      load_quantized_x16(layout, a.q8_scales, page, kv_head, slot, first, k, v);
    } else if (kind == KeyPages::band && ids.band >= 0) {
      const std::byte* page = a.band_pages + int64_t(ids.band) * a.band_layout.quantized_page_bytes;
      load_quantized_x16(a.band_layout, a.q8_scales, page, kv_head, slot, first, k, v);
    }
  }
#pragma unroll
  for (int i = 0; i < 16; i += 4) {
    *reinterpret_cast<float4*>(&s.keys[key][first + i]) =
        make_float4(k[i], k[i + 1], k[i + 2], k[i + 3]);
    *reinterpret_cast<float4*>(&s.values[key][first + i]) =
        make_float4(v[i], v[i + 1], v[i + 2], v[i + 3]);
  }
}

__device__ void score_tile(const AttentionArgs& a, Shared& s, const BlockItem& item, int tile,
                           KeyPages kind) {
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  float dot[4][2] = {};
  for (int c = 0; c < kHeadDim; c += 4) {
    const float4 k0 = *reinterpret_cast<const float4*>(&s.keys[tx][c]);
    const float4 k1 = *reinterpret_cast<const float4*>(&s.keys[tx + 16][c]);
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const float4 q = *reinterpret_cast<const float4*>(&s.query[4 * ty + r][c]);
      dot[r][0] += q.x * k0.x + q.y * k0.y + q.z * k0.z + q.w * k0.w;
      dot[r][1] += q.x * k1.x + q.y * k1.y + q.z * k1.z + q.w * k1.w;
    }
  }
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int row = 4 * ty + r;
#pragma unroll
    for (int b = 0; b < 2; ++b) {
      const int key = tx + 16 * b, position = tile + key;
      const bool in_range = position >= item.key_begin && position < item.key_end;
      const bool ok = in_range && reads(position, s.position[row], s.quantized_end[row],
                                        s.band_begin[row], int(a.sink_tokens), kind);
      s.weights[row][key] = ok ? dot[r][b] : -INFINITY;
    }
  }
}

// Four threads per row: the row's new max, its weights 2^(score - max) and the rescale factor.
__device__ void softmax_tile(Shared& s) {
  const int row = threadIdx.x / 4, part = threadIdx.x % 4;
  float* w = &s.weights[row][part * 8];
  float tile_max = -INFINITY;
#pragma unroll
  for (int i = 0; i < 8; ++i) tile_max = fmaxf(tile_max, w[i]);
  tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
  tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
  const float old_max = s.max[row];
  const float new_max = fmaxf(old_max, tile_max);
  const bool nothing_yet = new_max == -INFINITY;  // no key of this row so far
  const float correction = nothing_yet ? 1.0f : fast_exp2(old_max - new_max);
  float total = 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    w[i] = nothing_yet ? 0.0f : fast_exp2(w[i] - new_max);
    total += w[i];
  }
  total += __shfl_xor_sync(0xffffffffu, total, 1);
  total += __shfl_xor_sync(0xffffffffu, total, 2);
  __syncwarp();
  if (part == 0) {
    s.sum[row] = s.sum[row] * correction + total;
    s.max[row] = new_max;
    s.correction[row] = correction;
  }
}

__device__ void accumulate_tile(Shared& s, float (&acc)[4][8]) {
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const float c = s.correction[4 * ty + r];
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[r][i] *= c;
  }
  for (int key = 0; key < kKeys; ++key) {
    const float4 v0 = *reinterpret_cast<const float4*>(&s.values[key][4 * tx]);
    const float4 v1 = *reinterpret_cast<const float4*>(&s.values[key][64 + 4 * tx]);
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const float p = s.weights[4 * ty + r][key];
      acc[r][0] += p * v0.x;
      acc[r][1] += p * v0.y;
      acc[r][2] += p * v0.z;
      acc[r][3] += p * v0.w;
      acc[r][4] += p * v1.x;
      acc[r][5] += p * v1.y;
      acc[r][6] += p * v1.z;
      acc[r][7] += p * v1.w;
    }
  }
}

__device__ void load_queries(const AttentionArgs& a, Shared& s, const BlockItem& item,
                             int kv_head) {
  const int group = a.group;
  for (int i = threadIdx.x; i < kRows * kHeadDim / 4; i += kThreads) {
    const int row = i / (kHeadDim / 4), c4 = i % (kHeadDim / 4);
    const int token = row / group, head = row % group;
    float4 q = make_float4(0.f, 0.f, 0.f, 0.f);
    if (token < item.row_count && row < group * (kRows / group)) {
      const int64_t offset = (int64_t(item.first_row + token) * a.num_kv_heads * group +
                              int64_t(kv_head) * group + head) *
                             kHeadDim;
      q = reinterpret_cast<const float4*>(a.queries + offset)[c4];
      q.x *= a.score_scale;
      q.y *= a.score_scale;
      q.z *= a.score_scale;
      q.w *= a.score_scale;
    }
    *reinterpret_cast<float4*>(&s.query[row][4 * c4]) = q;
  }
  if (threadIdx.x < kRows) {
    const int token = threadIdx.x / group;
    const bool valid = token < item.row_count && int(threadIdx.x) < group * (kRows / group);
    const QueryRow row = a.rows[item.first_row + (valid ? token : 0)];
    s.position[threadIdx.x] = valid ? row.position : -1;
    s.quantized_end[threadIdx.x] = row.quantized_end;
    s.band_begin[threadIdx.x] = row.band_begin;
    s.max[threadIdx.x] = -INFINITY;
    s.sum[threadIdx.x] = 0.0f;
  }
}

__device__ void write_partials(const AttentionArgs& a, const Shared& s, const BlockItem& item,
                               int kv_head, const float (&acc)[4][8]) {
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  const int group = a.group;
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int row = 4 * ty + r;
    if (s.position[row] < 0) continue;
    const int token = row / group, head = row % group;
    float* record = a.partials + int64_t(item.partial + token * a.num_kv_heads + kv_head) *
                                     partial_record_floats(group, kHeadDim);
    float* out = record + 2 * group + head * kHeadDim;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      out[4 * tx + i] = acc[r][i];
      out[64 + 4 * tx + i] = acc[r][4 + i];
    }
    if (tx == 0) {
      record[head] = s.max[row];
      record[group + head] = s.sum[row];
    }
  }
}

__global__ void __launch_bounds__(kThreads) float_block_attention_kernel(const AttentionArgs args) {
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  Shared& s = *reinterpret_cast<Shared*>(shared_bytes);
  const int work_units = args.counts->block_items * args.num_kv_heads;
  const bool has_quantized = args.layout.bits > 0 && args.quantized_pages != nullptr;
  const bool has_band = args.band_pages != nullptr;
  const int sink = int(args.sink_tokens);
  for (int work = blockIdx.x; work < work_units; work += gridDim.x) {
    const BlockItem item = args.block_items[work / args.num_kv_heads];
    const int kv_head = work % args.num_kv_heads;
    __syncthreads();  // the previous item's partials are written
    load_queries(args, s, item, kv_head);
    float acc[4][8] = {};
    __syncthreads();
    const QueryRow first = args.rows[item.first_row];
    const QueryRow last = args.rows[item.first_row + item.row_count - 1];
    for (int tile = item.key_begin & ~(kKeys - 1); tile < item.key_end; tile += kKeys) {
      // The rows' boundaries grow with their positions: the union of the rows' ranges of a kind
      // runs from the first row's start to the last row's end.
      const bool need_quantized = has_quantized && tile + kKeys > sink && tile < last.band_begin;
      const bool need_band =
          has_band && tile + kKeys > first.band_begin && tile < last.quantized_end;
      const bool need_full =
          tile < sink || (tile + kKeys > first.quantized_end && tile <= last.position);
      for (const KeyPages kind : {KeyPages::quantized, KeyPages::band, KeyPages::full}) {
        const bool needed = kind == KeyPages::quantized ? need_quantized
                            : kind == KeyPages::band    ? need_band
                                                        : need_full;
        if (!needed) continue;
        load_tile(args, s, item, first.page_table, kv_head, tile, kind);
        __syncthreads();
        score_tile(args, s, item, tile, kind);
        __syncthreads();
        softmax_tile(s);
        __syncthreads();
        accumulate_tile(s, acc);
        __syncthreads();
      }
    }
    write_partials(args, s, item, kv_head, acc);
  }
}

constexpr int kSharedBytes = int(sizeof(Shared));

void prepare() {
  allow_dynamic_shared_memory(reinterpret_cast<const void*>(float_block_attention_kernel),
                              kSharedBytes, "cudaFuncSetAttribute(float_block_attention)");
}

}  // namespace

int float_block_attention_resident_blocks() {
  prepare();
  int per_multiprocessor = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &per_multiprocessor, float_block_attention_kernel, kThreads, kSharedBytes),
        "cudaOccupancyMaxActiveBlocksPerMultiprocessor(float_block_attention)");
  return multiprocessor_count() * per_multiprocessor;
}

void launch_float_block_attention(const AttentionArgs& args, int grid_blocks, cudaStream_t stream) {
  prepare();
  float_block_attention_kernel<<<grid_blocks, kThreads, kSharedBytes, stream>>>(args);
  check_launch("float_block_attention_kernel");
}

}  // namespace oscar::cuda
