#pragma once
// The jobs of a tensor-core prefill block (prefill_attention.cu): which tiles of 128 keys its rows
// read, in which formats, and where scores must be masked, under the decode rule
// (kvcache/kv_cache_config.h): the query at position t reads key j from its 2-bit copy iff
// sink <= j < band_begin(t + 1), from its band copy iff band_begin(t + 1) <= j <
// quantized_end(t + 1), and in full precision iff j <= t and (j < sink or j >= quantized_end(t +
// 1)). Host and device code, so that the host tests replay a block's jobs against the rule.
#include <cuda_runtime.h>

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

}  // namespace oscar::cuda
