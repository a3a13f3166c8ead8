#pragma once
// The jobs of a tensor-core prefill block (prefill_attention.cu): which tiles of 128 keys its rows
// read, in which formats, and where scores must be masked, under the decode rule
// (kvcache/kv_cache_config.h): the query at position t reads key j from its 2-bit copy iff
// sink <= j < band_begin(t + 1), from its band copy iff band_begin(t + 1) <= j <
// quantized_end(t + 1), and in full precision iff j <= t and (j < sink or j >= quantized_end(t +
// 1)). Host and device code, so that the host tests replay a block's jobs against the rule.
#include <cuda_runtime.h>

#include <algorithm>

#include "backend/cuda/step_work.h"

namespace oscar::cuda {

inline constexpr int kPrefillTileKeys = 128;

// The key positions a block item reads in each format: the union over its rows (their boundaries
// grow with their positions, so the first and last rows bound every row's ranges).
struct ItemBounds {
  int key_begin, key_end;
  int sink;
  int first_position, last_position;
  int first_quantized_end, last_quantized_end;
  int first_band_begin, last_band_begin;
  bool has_quantized, has_band;
};

// A tile read in one format.
struct Job {
  int tile;  // first key position; >= key_end: no more jobs
  KeyPages pages;
};

__host__ __device__ __forceinline__ bool job_needed(const ItemBounds& b, int tile, KeyPages pages) {
  constexpr int kKeys = kPrefillTileKeys;
  switch (pages) {
    case KeyPages::quantized:
      return b.has_quantized && tile + kKeys > b.sink && tile < b.last_band_begin;
    case KeyPages::band:
      return b.has_band && tile + kKeys > b.sink && tile + kKeys > b.first_band_begin &&
             tile < b.last_quantized_end;
    default:
      return tile < b.sink || (tile + kKeys > b.first_quantized_end && tile <= b.last_position);
  }
}

// The job after `job` (tiles in order, each tile's formats in KeyPages order).
__host__ __device__ __forceinline__ Job next_job(const ItemBounds& b, Job job) {
  int tile = job.tile, pages = int(job.pages);
  while (true) {
    if (++pages > int(KeyPages::band)) {
      pages = 0;
      tile += kPrefillTileKeys;
    }
    if (tile >= b.key_end || job_needed(b, tile, KeyPages(pages))) return {tile, KeyPages(pages)};
  }
}

__host__ __device__ __forceinline__ Job first_job(const ItemBounds& b) {
  const int tile = b.key_begin / kPrefillTileKeys * kPrefillTileKeys;
  if (job_needed(b, tile, KeyPages::full)) return {tile, KeyPages::full};
  return next_job(b, {tile, KeyPages::full});
}

// Whether every row of the item reads every key of the job's tile in the job's format.
__host__ __device__ __forceinline__ bool job_is_whole(const ItemBounds& b, Job job) {
  const int first = job.tile, last = job.tile + kPrefillTileKeys - 1;
  if (first < b.key_begin || last >= b.key_end) return false;
  switch (job.pages) {
    case KeyPages::quantized:
      return first >= b.sink && last < b.first_band_begin;
    case KeyPages::band:
      return first >= b.sink && first >= b.last_band_begin && last < b.first_quantized_end;
    default:
      return last <= b.first_position && (last < b.sink || first >= b.last_quantized_end);
  }
}

// The decode rule for one (row, key) pair in one format.
__host__ __device__ __forceinline__ bool reads(int key, int position, int quantized_end,
                                               int band_begin, int sink, KeyPages pages) {
  if (key > position) return false;
  const bool quantized = key >= sink && key < quantized_end;
  if (pages == KeyPages::full) return !quantized;
  return quantized && (key >= band_begin) == (pages == KeyPages::band);
}

// The keys one row reads in one format, as at most two ranges of positions counted from a first
// key: key first + c is read iff reads_at(c). Masking a tile then costs two unsigned compares a
// score rather than the rule's branches (an empty range has width 0).
struct RowKeys {
  int offset[2];
  unsigned width[2];
  __host__ __device__ __forceinline__ bool reads_at(int c) const {
    return unsigned(c - offset[0]) < width[0] || unsigned(c - offset[1]) < width[1];
  }
};

// The item's keys that the row at `position` reads in `pages` (reads(), within [key_begin,
// key_end)), from `first`: the 2-bit copy [sink, min(quantized_end, band_begin)), the band
// [max(sink, band_begin), quantized_end), full precision the keys below the sink and from
// quantized_end; all up to the row's own position. Padding rows (position -1) read none.
__host__ __device__ __forceinline__ RowKeys row_keys(const ItemBounds& b, int position,
                                                     int quantized_end, int band_begin,
                                                     KeyPages pages, int first) {
  const int low = b.key_begin, high = std::min(position + 1, b.key_end);
  int begin[2] = {0, 0}, end[2] = {0, 0};
  switch (pages) {
    case KeyPages::quantized:
      begin[0] = std::max(low, b.sink);
      end[0] = std::min(high, std::min(quantized_end, band_begin));
      break;
    case KeyPages::band:
      begin[0] = std::max(low, std::max(b.sink, band_begin));
      end[0] = std::min(high, quantized_end);
      break;
    default:
      begin[0] = low;
      end[0] = std::min(high, b.sink);
      // Where nothing is quantized this overlaps the first range.
      begin[1] = std::max(low, quantized_end);
      end[1] = high;
  }
  RowKeys keys;
  for (int i = 0; i < 2; ++i) {
    keys.offset[i] = begin[i] - first;
    keys.width[i] = unsigned(std::max(end[i] - begin[i], 0));
  }
  return keys;
}

}  // namespace oscar::cuda
