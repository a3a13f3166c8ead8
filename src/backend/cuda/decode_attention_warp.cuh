#pragma once
// What every path of the decode attention kernel (decode_attention.cu) shares: its sizes, a lane's
// place in the mma fragments, the warp's online-softmax state, its cp.async pipeline over the tiles
// of its share of a unit, the page ids of those tiles, the query's values, and the warp's state
// written to the merge area.
#include <cfloat>
#include <cstdint>

#include "backend/cuda/attention_args.h"
#include "backend/cuda/kernel_sizes.h"
#include "backend/cuda/warp_primitives.cuh"

namespace oscar::cuda::decode {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kPoolBytes = 16384;  // shared memory per warp: its pipeline stages
constexpr int kTileTokens = 16;
constexpr int kMaxGroup = 8;

struct Lane {
  int warp, lane, g, t;  // g = lane / 4 (mma row group), t = lane % 4
};

__device__ __forceinline__ Lane this_lane() {
  const int lane = threadIdx.x & 31;
  return {int(threadIdx.x >> 5), lane, lane >> 2, lane & 3};
}

// The warp's softmax state for heads 2t and 2t+1 of the group and its output accumulators.
struct WarpState {
  float acc[8][4];  // O^T fragments: 8 channel tiles x (rows g, g+8) x (heads 2t, 2t+1)
  float max[2];     // running max (log2 units), the same in every lane of a column
  float sum[2];     // this lane's part of sum 2^(score - max)

  __device__ void reset() {
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;
    max[0] = max[1] = -INFINITY;
    sum[0] = sum[1] = 0.0f;
  }
};

// The running max is raised only when a score passes it by more than this (log2 units), so the
// weights 2^(score - max) stay at most 2^kMaxSlack = 16 (an f16 weight times a value scale
// overflows only past scales of 4094). Below that the lanes need not agree on a new max: no
// shuffles, no rescale. Exact tracking rescaled the accumulators at 56% of the INT2 super-tiles
// (Nsight Compute, 100K x 8) and put three dependent shuffle rounds on every tile's path to its
// weights; the sums and outputs are the same ratios either way.
constexpr float kMaxSlack = 4.0f;

// Scores of `Tiles` 16-token tiles (tile i, row g: s[i][0], s[i][1]; row g+8: s[i][2], s[i][3])
// become weights; returns the factor that rescales what was accumulated before
// (2^(old max - new max)) for heads 2t, 2t+1, 1 where the max stays. `rescale(correction)` applies
// it to accumulators beyond WarpState's, and runs only when the max was raised.
template <int Tiles, typename Rescale>
__device__ __forceinline__ void online_softmax(float (&s)[Tiles][4], WarpState& state,
                                               float (&correction)[2], Rescale rescale) {
  float lane_max[2];
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    lane_max[e] = fmaxf(s[0][e], s[0][e + 2]);
#pragma unroll
    for (int i = 1; i < Tiles; ++i) lane_max[e] = fmaxf(lane_max[e], fmaxf(s[i][e], s[i][e + 2]));
  }
  correction[0] = correction[1] = 1.0f;
  // The first tile always raises it (the max starts at -inf; every tile has a valid key).
  if (__any_sync(0xffffffffu, lane_max[0] > state.max[0] + kMaxSlack ||
                                  lane_max[1] > state.max[1] + kMaxSlack)) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      float tile_max = lane_max[e];
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 4));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 8));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 16));
      const float new_max = fmaxf(state.max[e], tile_max);
      correction[e] = fast_exp2(state.max[e] - new_max);
      state.sum[e] *= correction[e];
      state.max[e] = new_max;
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      state.acc[i][0] *= correction[0];
      state.acc[i][1] *= correction[1];
      state.acc[i][2] *= correction[0];
      state.acc[i][3] *= correction[1];
    }
    rescale(correction);
  }
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    float sum = state.sum[e];
#pragma unroll
    for (int i = 0; i < Tiles; ++i) {
      s[i][e] = fast_exp2(s[i][e] - state.max[e]);
      s[i][e + 2] = fast_exp2(s[i][e + 2] - state.max[e]);
      sum += s[i][e] + s[i][e + 2];
    }
    state.sum[e] = sum;
  }
}

// One tile, nothing accumulated beside WarpState.
__device__ __forceinline__ void online_softmax(float (&s)[4], WarpState& state,
                                               float (&correction)[2]) {
  online_softmax(reinterpret_cast<float(&)[1][4]>(s), state, correction, [](const float(&)[2]) {});
}

__device__ __forceinline__ float reduce_rows(float value) {
  value += __shfl_xor_sync(0xffffffffu, value, 4);
  value += __shfl_xor_sync(0xffffffffu, value, 8);
  value += __shfl_xor_sync(0xffffffffu, value, 16);
  return value;
}

__device__ __forceinline__ void mask_tile(float (&s)[4], int tile_start, int g, int begin,
                                          int end) {
  const int p0 = tile_start + g, p1 = p0 + 8;
  if (p0 < begin || p0 >= end) s[0] = s[1] = -INFINITY;
  if (p1 < begin || p1 >= end) s[2] = s[3] = -INFINITY;
}

// A warp's cp.async pipeline over its tiles j = 0..count-1 in `Stages` buffers of its pool:
// `load(j, buffer)` issues tile j's copies. pipeline_start issues the first Stages - 1 tiles' (one
// commit group each) as soon as the warp has its page ids, before the caller sets up its query
// (QueryValues); pipeline_run then runs `compute(j, buffer)` over the tiles, issuing each tile's
// copies Stages - 1 tiles ahead.
template <int Stages, int StageBytes, typename Load>
__device__ __forceinline__ void pipeline_start(unsigned char* pool, int count, Load load) {
#pragma unroll
  for (int s = 0; s < Stages - 1; ++s) {
    if (s < count) load(s, pool + s * StageBytes);
    cp_async_commit();
  }
}

template <int Stages, int StageBytes, typename Load, typename Compute>
__device__ __forceinline__ void pipeline_run(unsigned char* pool, int count, Load load,
                                             Compute compute) {
  // Stage indices advance with a wrap instead of j % Stages: with three stages each modulo was a
  // multiply-high and three more instructions in the loop.
  int stage = 0, ahead_stage = Stages - 1;
  for (int j = 0; j < count; ++j) {
    cp_async_wait<Stages - 2>();
    __syncwarp();  // tile j is visible to every lane; tile j - 1's buffer is free
    const int ahead = j + Stages - 1;
    if (ahead < count) load(ahead, pool + ahead_stage * StageBytes);
    cp_async_commit();
    compute(j, pool + stage * StageBytes);
    if (++stage == Stages) stage = 0;
    if (++ahead_stage == Stages) ahead_stage = 0;
  }
  cp_async_wait<0>();
}

struct ItemContext {
  const AttentionArgs* args;
  DecodeItem item;
  int kv_head;
  const float* q8_scales;  // the q8 scale table, copied to shared memory
};

// A warp's share of an item in tiles of `Tokens` positions aligned to `Tokens`: tiles warp,
// warp + kWarps, ... of those that overlap [begin, end).
template <int Tokens>
struct WarpTiles {
  int first;  // position of the item's first tile
  int warp;
  int count;  // this warp's tiles

  __device__ WarpTiles(const DecodeItem& item, int w) : first(item.begin & ~(Tokens - 1)), warp(w) {
    const int total = (item.end - first + Tokens - 1) / Tokens;
    count = total > warp ? (total - warp + kWarps - 1) / kWarps : 0;
  }
  __device__ int position(int j) const { return first + (warp + j * kWarps) * Tokens; }
};

// A key position's page and slot, without a division when pages hold a power of two tokens (the
// default 64): a division by the runtime page size costs about twenty instructions a tile.
struct PagePosition {
  int page, slot;
};
__device__ __forceinline__ PagePosition page_position(int position, int page_size) {
  if ((page_size & (page_size - 1)) == 0)
    return {position >> (__ffs(page_size) - 1), position & (page_size - 1)};
  const int page = position / page_size;
  return {page, position - page * page_size};
}

// The page ids of a warp's tiles, 32 at a time: lane k holds tile base + k's, read by all lanes
// at once, and tile j's id is a shuffle. A page-table load per tile, its result needed a few
// instructions later, stalled each warp for an L2 round trip per tile (the kernel's most sampled
// stall in Nsight Compute's source view: 4% of its samples at 128K x 8). The first 32 are read at
// construction; `get` must be called by the whole warp with j nondecreasing. `id_of(k)` reads
// tile k's id (k < count).
template <typename IdOf>
class TilePageIds {
 public:
  __device__ TilePageIds(int count, IdOf id_of) : count_(count), id_of_(id_of) { fill(0); }
  __device__ int32_t get(int j) {
    if (j >= base_ + 32) fill(j);
    return __shfl_sync(0xffffffffu, mine_, j - base_);
  }

 private:
  __device__ void fill(int first_tile) {
    base_ = first_tile;
    const int k = first_tile + int(threadIdx.x & 31);
    mine_ = k < count_ ? id_of_(k) : 0;
  }

  int count_;
  IdOf id_of_;
  int base_ = 0;
  int32_t mine_ = 0;
};

__device__ __forceinline__ const float* group_queries(const ItemContext& c) {
  const AttentionArgs& a = *c.args;
  return a.queries +
         (int64_t(c.item.row) * a.num_kv_heads * a.group + int64_t(c.kv_head) * a.group) * kHeadDim;
}

// The 32 query values lane (g, t) puts into the score mma's B operand, value i channel
// `channel_of(i)` of head g (zero past the group's heads). The constructor loads them if `early`,
// before the unit's first copies (pipeline_start), load_late after the copies otherwise; either
// way they are converted after the copies. Which order is faster depends on the warp's share of
// the unit (A/B over the decode-attention grid: docs/bench/notes/2026-11-27-decode-attention.md).
// Quantized pages: the query first where a warp's share is at most kEarlyQueryPositions
// (loads_query_first; INT2 splits up to 1536 positions), the copies first beyond. Most likely the
// query's 32 loads a lane, issued before the copies, delay the wait for the page ids that the
// copies need; where a share is short, the query's own wait behind the copies costs more. bf16
// pages: the copies first.
constexpr int kEarlyQueryPositions = 512;
template <int Tokens>
__device__ __forceinline__ bool loads_query_first(const WarpTiles<Tokens>& tiles) {
  return tiles.count * Tokens <= kEarlyQueryPositions;
}

template <typename ChannelOf>
class QueryValues {
 public:
  float x[32];

  __device__ QueryValues(const ItemContext& c, int g, bool early, ChannelOf channel_of)
      : q_(group_queries(c) + g * kHeadDim),
        head_exists_(g < c.args->group),
        early_(early),
        channel_of_(channel_of) {
#pragma unroll
    for (int i = 0; i < 32; ++i) x[i] = early_ && head_exists_ ? q_[channel_of_(i)] : 0.f;
  }
  // After pipeline_start.
  __device__ void load_late() {
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      if (!early_ && head_exists_) x[i] = q_[channel_of_(i)];
    }
  }

 private:
  const float* q_;
  bool head_exists_, early_;
  ChannelOf channel_of_;
};

// Writes this warp's state for the group's heads into its slice of the merge area:
// [max[G], sum[G], out[G][D]]; `channel_value(tile, row_half, e)` gives out for row g / g+8.
template <typename ChannelOf, typename ValueOf>
__device__ __forceinline__ void write_warp_state(const Lane& l, int group, const WarpState& state,
                                                 float* merge, ChannelOf channel_of,
                                                 ValueOf value_of) {
  float* mine = merge + l.warp * group * (kHeadDim + 2);
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    const int head = 2 * l.t + e;
    if (head >= group) continue;
    if (l.g == 0) {
      mine[head] = state.max[e];
      mine[group + head] = state.sum[e];
    }
    float* out = mine + 2 * group + head * kHeadDim;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      out[channel_of(i, 0)] = value_of(i, 0, e);
      out[channel_of(i, 1)] = value_of(i, 1, e);
    }
  }
}

// After a quantized item's pipeline: the lanes' sums over their rows become the warp's, and the
// pools are released (every warp is done with its own) to become the merge area.
template <int Groups>
__device__ __forceinline__ void finish_quantized_item(WarpState& state,
                                                      float (&zero_acc)[Groups][2]) {
  state.sum[0] = reduce_rows(state.sum[0]);
  state.sum[1] = reduce_rows(state.sum[1]);
#pragma unroll
  for (int grp = 0; grp < Groups; ++grp) {
    zero_acc[grp][0] = reduce_rows(zero_acc[grp][0]);
    zero_acc[grp][1] = reduce_rows(zero_acc[grp][1]);
  }
  __syncthreads();
}

}  // namespace oscar::cuda::decode
