// Paged split-K decode attention. Mirrors cpu_attention (backend/cpu/cpu_attention.cpp) for a
// single query token: the query at position t reads keys [0, a) and [max(a, b), t] from bf16 pages
// and [sink, b) from quantized pages (a = min(sink, t + 1), b = quantized_end(t + 1)).
//
// Work: persistent blocks take (decode item, KV head) units in turn from a device counter; the
// block's four warps take the item's tiles round-robin (16 tokens; super-tiles of 64 (INT2) or 32
// (INT4) tokens in groups of 64 or 128, see process_packed_item), each with its own cp.async
// pipeline in shared memory, and merge their softmax states at the end into one partial record (attention_combine.cu
// merges the splits). All query heads of the GQA group are one mma operand.
//
// Per 16-token tile, as mma.m16n8k16 (tokens x channels x heads), f32 accumulation:
//   scores  S[token][head] = sum_channels K[token][c] q[head][c]    (A = keys, B = query)
//   output  O^T[c][head]  += sum_tokens V^T[c][token] P[token][head] (A = values^T, B = P^T)
// P is transposed from the scores' accumulator layout into the B layout with movmatrix.
// bf16 pages: A comes from shared memory through ldmatrix; the query and P are split into
// bf16 high + low halves (two mma each), so they keep ~16 bits like the CPU's float math.
// Quantized pages: the integer codes are the A operand, unpacked in registers into exact f16
// integers (code | 0x6400 is the f16 1024 + code), and dequantization costs one multiply-add per
// group (OSCAR "Read path"):
//   score   = sum_g s_g * (sum_{c in g} q_c code_c) + z_g * (sum_{c in g} q_c)
//   output  = sum_g sum_tokens (p s_g) code + sum_tokens p z_g
// The query (rotated by R_K already) is split into f16 high + low; P * s is one f16 operand.
// Any channel order inside a k-tile gives the same dot product, so each lane takes the codes that
// are 16 bits apart in one 32-bit word (one shift, one lop3 per pair); codes that sit 2 or 4 bits
// higher are taken unshifted as code * 4 (or * 16), the query divided by the same power of two.
// INT2 and INT4 in groups of 64 or 128 channels (the OSCAR configurations and the band) have
// their own path (process_packed_item): ldmatrix loads of the codes, no subtraction, super-tiles, the
// query one f16 operand (2^-11 relative, 8x finer than the bf16 activations it comes from).
// Other formats keep per-lane word loads (a 32-channel group would split an m-tile's rows).
// Where a GQA group has at most four heads, the score mma's unused columns can hold a second
// m-tile's scores (AttentionArgs::pair_m_tiles, process_packed_item's `Paired`).
#include "backend/cuda/decode_attention.h"

#include <cfloat>
#include <type_traits>

#include "backend/cuda/chained_launch.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_codec.cuh"
#include "backend/cuda/warp_primitives.cuh"

namespace oscar::cuda {
namespace {

constexpr int kHeadDim = 128;
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kPoolBytes = 16384;  // shared memory per warp: its pipeline stages
constexpr int kTileTokens = 16;
constexpr int kMaxGroup = 8;
constexpr uint32_t kMagic = 0x64006400u;  // f16x2 (1024, 1024)

// Full-precision tile: 16 key rows then 16 value rows of 256 bytes; the 16-byte chunk c of row r
// is stored at chunk c ^ (r % 8) so that ldmatrix's eight rows hit eight distinct bank groups.
constexpr int kFullRowBytes = kHeadDim * 2;
constexpr int kFullTileBytes = 2 * kTileTokens * kFullRowBytes;
constexpr int kFullStages = kPoolBytes / kFullTileBytes;

// Quantized tile: key codes, value codes (rows padded by 16 bytes so that the lanes' word reads
// spread over the banks), then key and value parameters as stored (16 tokens x groups).
template <int Bits, int Group>
struct QuantizedTile {
  static constexpr int kCodeBytes = kHeadDim * Bits / 8;
  static constexpr int kCodeStride = kCodeBytes + 16;
  static constexpr int kGroups = kHeadDim / Group;
  static constexpr int kParamBytes = kTileTokens * kGroups * 4;  // room for f16/bf16 pairs
  static constexpr int kKeyCodes = 0;
  static constexpr int kValueCodes = kTileTokens * kCodeStride;
  static constexpr int kKeyParams = 2 * kTileTokens * kCodeStride;
  static constexpr int kValueParams = kKeyParams + kParamBytes;
  static constexpr int kBytes = kValueParams + kParamBytes;
  static constexpr int kStages = kPoolBytes / kBytes > 8 ? 8 : kPoolBytes / kBytes;
  static_assert(kBytes % 16 == 0 && kStages >= 2, "quantized tile layout");
};

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
// it to accumulators beyond WarpState's, and runs only when the max was raised. `EmptyColumns`: a
// column may have no valid score yet (its max still -inf; paired m-tiles, see process_packed_item),
// so its weights are taken against 0 and its correction is 1 rather than 2^(-inf + inf).
template <bool EmptyColumns = false, int Tiles, typename Rescale>
__device__ __forceinline__ void online_softmax(float (&s)[Tiles][4], WarpState& state, float (&correction)[2],
                                               Rescale rescale) {
  float lane_max[2];
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    lane_max[e] = fmaxf(s[0][e], s[0][e + 2]);
#pragma unroll
    for (int i = 1; i < Tiles; ++i) lane_max[e] = fmaxf(lane_max[e], fmaxf(s[i][e], s[i][e + 2]));
  }
  correction[0] = correction[1] = 1.0f;
  // The first tile always raises it (the max starts at -inf; every tile has a valid key).
  if (__any_sync(0xffffffffu, lane_max[0] > state.max[0] + kMaxSlack || lane_max[1] > state.max[1] + kMaxSlack)) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      float tile_max = lane_max[e];
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 4));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 8));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 16));
      const float new_max = fmaxf(state.max[e], tile_max);
      correction[e] = EmptyColumns && new_max == -INFINITY ? 1.0f : fast_exp2(state.max[e] - new_max);
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
    const float max = EmptyColumns && state.max[e] == -INFINITY ? 0.0f : state.max[e];
#pragma unroll
    for (int i = 0; i < Tiles; ++i) {
      s[i][e] = fast_exp2(s[i][e] - max);
      s[i][e + 2] = fast_exp2(s[i][e + 2] - max);
      sum += s[i][e] + s[i][e + 2];
    }
    state.sum[e] = sum;
  }
}

// One tile, nothing accumulated beside WarpState.
__device__ __forceinline__ void online_softmax(float (&s)[4], WarpState& state, float (&correction)[2]) {
  online_softmax(reinterpret_cast<float(&)[1][4]>(s), state, correction, [](const float(&)[2]) {});
}

__device__ __forceinline__ float reduce_rows(float value) {
  value += __shfl_xor_sync(0xffffffffu, value, 4);
  value += __shfl_xor_sync(0xffffffffu, value, 8);
  value += __shfl_xor_sync(0xffffffffu, value, 16);
  return value;
}

__device__ __forceinline__ void mask_tile(float (&s)[4], int tile_start, int g, int begin, int end) {
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
__device__ __forceinline__ void pipeline_run(unsigned char* pool, int count, Load load, Compute compute) {
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
  if ((page_size & (page_size - 1)) == 0) return {position >> (__ffs(page_size) - 1), position & (page_size - 1)};
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
  return a.queries + (int64_t(c.item.row) * a.num_kv_heads * a.group + int64_t(c.kv_head) * a.group) * kHeadDim;
}

// The 32 query values lane (g, t) puts into the score mma's B operand, value i channel
// `channel_of(i)` of head g (zero past the group's heads). The constructor loads them if `early`,
// before the unit's first copies (pipeline_start), load_late after the copies otherwise; either
// way they are converted after the copies. Which order is faster depends on the warp's share of
// the unit (H100, A/B over the decode-attention grid, docs/bench/README.md section (a)). Quantized
// pages: the query first where a warp's share is at most kEarlyQueryPositions (loads_query_first;
// INT2 splits up to 1536 positions), the copies first beyond, was faster than the query first everywhere at 34 of
// 36 INT2 shapes (16K x 4 6%, 64K x 8 3.1%, 32K x 8 2.3%); the copies first everywhere lost up
// to 7.6% where shares are short (8K x 4). Most likely the query's 32 loads a lane, issued before
// the copies, delay the wait for the page ids that the copies need; where a share is short, the
// query's own wait behind the copies costs more. bf16 pages: the copies first, faster at small
// batches (8K x 1 3.4%) and level elsewhere.
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
      : q_(group_queries(c) + g * kHeadDim), head_exists_(g < c.args->group), early_(early), channel_of_(channel_of) {
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
// `Paired` (process_packed_item): columns 4-7 hold a second state of heads 0-3, written as a
// second slice (the warp's slices are 2w and 2w + 1 of kPairedStates).
template <bool Paired = false, typename ChannelOf, typename ValueOf>
__device__ __forceinline__ void write_warp_state(const Lane& l, int group, const WarpState& state,
                                                 float* merge, ChannelOf channel_of, ValueOf value_of) {
  float* mine = merge + (Paired ? 2 * l.warp + (l.t >> 1) : l.warp) * group * (kHeadDim + 2);
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    const int head = Paired ? (2 * l.t + e) & 3 : 2 * l.t + e;
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

// ---- bf16 pages ---------------------------------------------------------------------------------

__device__ void process_full_item(const ItemContext& c, WarpState& state, unsigned char* pool, float* merge) {
  const Lane l = this_lane();
  const WarpTiles<kTileTokens> tiles(c.item, l.warp);
  const AttentionArgs& a = *c.args;
  const PageLayout& layout = a.layout;
  // Lane L copies 16-byte chunk L % 16 of rows L / 16 + 2i: one source address per tile, the
  // others at constant offsets (32-bit offsets inside a page, computed once per item).
  const uint32_t head_keys =
      uint32_t(layout.full_key_offset(c.kv_head, 0)) + (l.lane >> 4) * kFullRowBytes + (l.lane & 15) * 16;
  const uint32_t values_after_keys = uint32_t(layout.full_value_offset(0, 0));
  // The page ids of the warp's tiles (TilePageIds) and the first tiles' copies, then the query's
  // conversion; its loads before or after the copies (QueryValues says why).
  // Value 4kt + {0, 1, 2, 3}: channels 16kt + 2t + {0, 1, 8, 9}.
  QueryValues query(c, l.g, /*early=*/false,
                    [&](int i) { return 16 * (i / 4) + 2 * l.t + (i & 1) + (i & 2) * 4; });
  const int page_size = int(layout.page_size_tokens);
  TilePageIds page_ids(tiles.count, [&](int k) {
    return a.page_table[c.item.page_table + page_position(tiles.position(k), page_size).page].full;
  });
  auto load = [&](int j, unsigned char* buffer) {
    const PagePosition at = page_position(tiles.position(j), page_size);
    const int32_t page = page_ids.get(j);
    const std::byte* keys =
        a.full_pages + int64_t(page) * layout.full_page_bytes + (head_keys + uint32_t(at.slot) * kFullRowBytes);
    const std::byte* values = keys + values_after_keys;
    const uint32_t base = shared_address(buffer);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int r = (l.lane >> 4) + 2 * i, col = l.lane & 15;
      const uint32_t dst = r * kFullRowBytes + ((col ^ (r & 7)) << 4);
      cp_async_16(base + dst, keys + 2 * i * kFullRowBytes);
      cp_async_16(base + kTileTokens * kFullRowBytes + dst, values + 2 * i * kFullRowBytes);
    }
  };
  pipeline_start<kFullStages, kFullTileBytes>(pool, tiles.count, load);
  query.load_late();
  // B operand of the score mma: query[head g][channels 16kt + 2t, +1 | +8, +9], bf16 high + low.
  uint32_t q_high[8][2], q_low[8][2];
#pragma unroll
  for (int kt = 0; kt < 8; ++kt) {
    const float* x = query.x + 4 * kt;
    const float s = a.score_scale;
    split_bf16x2(x[0] * s, x[1] * s, q_high[kt][0], q_low[kt][0]);
    split_bf16x2(x[2] * s, x[3] * s, q_high[kt][1], q_low[kt][1]);
  }
  auto compute = [&](int j, unsigned char* buffer) {
    const uint32_t keys = shared_address(buffer);
    const uint32_t values = keys + kTileTokens * kFullRowBytes;
    float s[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int kt = 0; kt < 8; ++kt) {
      const int r = l.lane & 15, col = 2 * kt + (l.lane >> 4);
      uint32_t k[4];
      ldmatrix_x4(k, keys + r * kFullRowBytes + ((col ^ (r & 7)) << 4));
      mma_bf16(s, k, q_high[kt]);
      mma_bf16(s, k, q_low[kt]);
    }
    mask_tile(s, tiles.position(j), l.g, c.item.begin, c.item.end);
    float correction[2];
    online_softmax(s, state, correction);
    uint32_t p_high[2], p_low[2], h, lo;
    split_bf16x2(s[0], s[1], h, lo);
    p_high[0] = movmatrix_trans(h);
    p_low[0] = movmatrix_trans(lo);
    split_bf16x2(s[2], s[3], h, lo);
    p_high[1] = movmatrix_trans(h);
    p_low[1] = movmatrix_trans(lo);
#pragma unroll
    for (int mt = 0; mt < 8; ++mt) {
      const int r = (l.lane & 7) + ((l.lane >> 4) << 3), col = 2 * mt + ((l.lane >> 3) & 1);
      uint32_t v[4];
      ldmatrix_x4_trans(v, values + r * kFullRowBytes + ((col ^ (r & 7)) << 4));
      mma_bf16(state.acc[mt], v, p_high);
      mma_bf16(state.acc[mt], v, p_low);
    }
  };
  pipeline_run<kFullStages, kFullTileBytes>(pool, tiles.count, load, compute);
  state.sum[0] = reduce_rows(state.sum[0]);
  state.sum[1] = reduce_rows(state.sum[1]);
  __syncthreads();  // every warp is done with its pool: the pools become the merge area
  write_warp_state(
      l, a.group, state, merge, [&](int i, int half) { return 16 * i + l.g + 8 * half; },
      [&](int i, int half, int e) { return state.acc[i][2 * half + e]; });
}

// ---- quantized pages ----------------------------------------------------------------------------

// After a quantized item's pipeline: the lanes' sums over their rows become the warp's, and the
// pools are released (every warp is done with its own) to become the merge area.
template <int Groups>
__device__ __forceinline__ void finish_quantized_item(WarpState& state, float (&zero_acc)[Groups][2]) {
  state.sum[0] = reduce_rows(state.sum[0]);
  state.sum[1] = reduce_rows(state.sum[1]);
#pragma unroll
  for (int grp = 0; grp < Groups; ++grp) {
    zero_acc[grp][0] = reduce_rows(zero_acc[grp][0]);
    zero_acc[grp][1] = reduce_rows(zero_acc[grp][1]);
  }
  __syncthreads();
}

// Quantized pages read with word loads; `Band`: the band's pages (AttentionArgs::band_layout and
// band_pages, PageIds::band) instead of the cache's quantized ones.
template <int Bits, int Group, ParamFormat Format, bool Band = false>
__device__ void process_quantized_item(const ItemContext& c, WarpState& state, unsigned char* pool,
                                       float* merge) {
  using Tile = QuantizedTile<Bits, Group>;
  constexpr int kGroups = Tile::kGroups;
  constexpr int kCodesPerWord = 32 / Bits;
  constexpr int kHalfWord = kCodesPerWord / 2;   // codes 16 bits apart: k and k + kHalfWord
  constexpr int kLanesPerWord = kHalfWord / 2;   // lanes sharing one word of a k-tile
  constexpr float kHighFactor = float(1 << Bits);
  constexpr uint32_t kLowMask = ((1u << Bits) - 1) * 0x00010001u;
  constexpr uint32_t kHighMask = kLowMask << Bits;
  const Lane l = this_lane();
  const WarpTiles<kTileTokens> tiles(c.item, l.warp);
  const AttentionArgs& a = *c.args;
  const PageLayout& layout = Band ? a.band_layout : a.layout;
  const std::byte* arena = Band ? a.band_pages : a.quantized_pages;
  const int param_bytes = int(layout.param_bytes);

  // Score-side lane mapping: k-tile kt covers channels 16kt..16kt+15; lane t reads word
  // `key_word(kt)` of a token's codes shifted right by `key_shift`; its low pair is channels
  // (c0, c0 + kHalfWord), its high pair (c0 + 1, c0 + 1 + kHalfWord) times 2^Bits.
  const int lane_in_word = l.t % kLanesPerWord;
  const int key_shift = 2 * lane_in_word * Bits;
  auto key_word = [&](int kt) { return kt * (16 / kCodesPerWord) + l.t / kLanesPerWord; };

  // The page ids of the warp's tiles (TilePageIds) and the first tiles' copies, then the query's
  // conversion; its loads before or after the copies (QueryValues says why).
  // Value 4kt + {0, 1, 2, 3}: channels c0, c0 + kHalfWord, c0 + 1, c0 + 1 + kHalfWord of k-tile kt.
  auto first_channel = [&](int kt) { return key_word(kt) * kCodesPerWord + 2 * lane_in_word; };
  QueryValues query(c, l.g, loads_query_first(tiles),
                    [&](int i) { return first_channel(i / 4) + (i & 1) * kHalfWord + (i >> 1 & 1); });
  const int page_size = int(layout.page_size_tokens);
  TilePageIds page_ids(tiles.count, [&](int k) {
    const PageIds ids = a.page_table[c.item.page_table + page_position(tiles.position(k), page_size).page];
    return Band ? ids.band : ids.quantized;
  });
  auto load = [&](int j, unsigned char* buffer) {
    const int slot = page_position(tiles.position(j), page_size).slot;
    const std::byte* page = arena + int64_t(page_ids.get(j)) * layout.quantized_page_bytes;
    const uint32_t base = shared_address(buffer);
    constexpr int kChunksPerRow = Tile::kCodeBytes / 16;
    const std::byte* key_codes = page + layout.key_codes(c.kv_head, slot);
    const std::byte* value_codes = page + layout.value_codes(c.kv_head, slot);
#pragma unroll
    for (int chunk = l.lane; chunk < kTileTokens * kChunksPerRow; chunk += 32) {
      const int r = chunk / kChunksPerRow, part = chunk % kChunksPerRow;
      const uint32_t dst = r * Tile::kCodeStride + part * 16;
      cp_async_16(base + Tile::kKeyCodes + dst, key_codes + r * Tile::kCodeBytes + part * 16);
      cp_async_16(base + Tile::kValueCodes + dst, value_codes + r * Tile::kCodeBytes + part * 16);
    }
    const int param_chunks = kTileTokens * kGroups * param_bytes / 16;
    if (l.lane < param_chunks) {
      cp_async_16(base + Tile::kKeyParams + l.lane * 16,
                  page + layout.key_params(c.kv_head, slot, 0) + l.lane * 16);
      cp_async_16(base + Tile::kValueParams + l.lane * 16,
                  page + layout.value_params(c.kv_head, slot, 0) + l.lane * 16);
    }
  };
  pipeline_start<Tile::kStages, Tile::kBytes>(pool, tiles.count, load);
  query.load_late();
  uint32_t q_high[8][2], q_low[8][2];  // B operands of the score mma: f16 high + low
  // The four lanes of row g hold every channel of head g between them: their sums per group,
  // gathered below, are the per-group query sums.
  float q_sum_part[kGroups];
#pragma unroll
  for (int grp = 0; grp < kGroups; ++grp) q_sum_part[grp] = 0.f;
#pragma unroll
  for (int kt = 0; kt < 8; ++kt) {
    const float* x = query.x + 4 * kt;
    const float s = a.score_scale;
    const float low0 = x[0] * s, low1 = x[1] * s, high0 = x[2] * s, high1 = x[3] * s;
    q_sum_part[16 * kt / Group] += (low0 + low1) + (high0 + high1);
    split_f16x2(low0, low1, q_high[kt][0], q_low[kt][0]);
    split_f16x2(high0 / kHighFactor, high1 / kHighFactor, q_high[kt][1], q_low[kt][1]);
  }
  // Per-group query sums for this lane's score columns (heads 2t, 2t+1).
  float q_sum[kGroups][2];
#pragma unroll
  for (int grp = 0; grp < kGroups; ++grp) {
    q_sum_part[grp] += __shfl_xor_sync(0xffffffffu, q_sum_part[grp], 1);
    q_sum_part[grp] += __shfl_xor_sync(0xffffffffu, q_sum_part[grp], 2);
#pragma unroll
    for (int e = 0; e < 2; ++e) q_sum[grp][e] = __shfl_sync(0xffffffffu, q_sum_part[grp], 4 * (2 * l.t + e));
  }
  float zero_acc[kGroups][2];
#pragma unroll
  for (int grp = 0; grp < kGroups; ++grp) zero_acc[grp][0] = zero_acc[grp][1] = 0.f;

  // Value-side lane mapping: channel tile mt, row g is channel 16mt + 2g and row g+8 channel
  // 16mt + 2g + 1, both in byte (16mt + 2g) * Bits / 8 of a token's codes, at bit `value_bit`
  // and value_bit + Bits: taken unshifted (times 2^value_bit) and scaled back at the end.
  const int value_bit = (2 * l.g * Bits) % 8;
  const uint32_t value_mask_low = (((1u << Bits) - 1) << value_bit) * 0x00010001u;
  const uint32_t value_mask_high = value_mask_low << Bits;

  auto compute = [&](int j, unsigned char* buffer) {
    // Scores: per group, sum over its channels of code * query (f16 codes, query high + low).
    float group_dot[kGroups][4];
#pragma unroll
    for (int grp = 0; grp < kGroups; ++grp)
      group_dot[grp][0] = group_dot[grp][1] = group_dot[grp][2] = group_dot[grp][3] = 0.f;
    const uint32_t* row_g = reinterpret_cast<const uint32_t*>(buffer + Tile::kKeyCodes + l.g * Tile::kCodeStride);
    const uint32_t* row_g8 =
        reinterpret_cast<const uint32_t*>(buffer + Tile::kKeyCodes + (l.g + 8) * Tile::kCodeStride);
#pragma unroll
    for (int kt = 0; kt < 8; ++kt) {
      const uint32_t x0 = row_g[key_word(kt)] >> key_shift;
      const uint32_t x1 = row_g8[key_word(kt)] >> key_shift;
      const uint32_t k[4] = {minus_1024_f16x2(and_or(x0, kLowMask, kMagic)),
                             minus_1024_f16x2(and_or(x1, kLowMask, kMagic)),
                             minus_1024_f16x2(and_or(x0, kHighMask, kMagic)),
                             minus_1024_f16x2(and_or(x1, kHighMask, kMagic))};
      const int grp = 16 * kt / Group;
      mma_f16(group_dot[grp], k, q_high[kt]);
      mma_f16(group_dot[grp], k, q_low[kt]);
    }
    const uint8_t* key_params = buffer + Tile::kKeyParams;
    const uint8_t* value_params = buffer + Tile::kValueParams;
    float s[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int grp = 0; grp < kGroups; ++grp) {
      const DeviceParams p0 = load_params<Format>(key_params + (l.g * kGroups + grp) * param_bytes, c.q8_scales);
      const DeviceParams p1 = load_params<Format>(key_params + ((l.g + 8) * kGroups + grp) * param_bytes, c.q8_scales);
      s[0] += p0.scale * group_dot[grp][0] + p0.zero * q_sum[grp][0];
      s[1] += p0.scale * group_dot[grp][1] + p0.zero * q_sum[grp][1];
      s[2] += p1.scale * group_dot[grp][2] + p1.zero * q_sum[grp][0];
      s[3] += p1.scale * group_dot[grp][3] + p1.zero * q_sum[grp][1];
    }
    mask_tile(s, tiles.position(j), l.g, c.item.begin, c.item.end);
    float correction[2];
    online_softmax(s, state, correction);
    // Weights per value group: P * scale as the B operand, P * zero summed on the side.
    uint32_t weights[kGroups][2];
#pragma unroll
    for (int grp = 0; grp < kGroups; ++grp) {
      const DeviceParams p0 = load_params<Format>(value_params + (l.g * kGroups + grp) * param_bytes, c.q8_scales);
      const DeviceParams p1 = load_params<Format>(value_params + ((l.g + 8) * kGroups + grp) * param_bytes, c.q8_scales);
      zero_acc[grp][0] = zero_acc[grp][0] * correction[0] + s[0] * p0.zero + s[2] * p1.zero;
      zero_acc[grp][1] = zero_acc[grp][1] * correction[1] + s[1] * p0.zero + s[3] * p1.zero;
      weights[grp][0] = movmatrix_trans(pack_f16x2(s[0] * p0.scale, s[1] * p0.scale));
      weights[grp][1] = movmatrix_trans(pack_f16x2(s[2] * p1.scale, s[3] * p1.scale));
    }
    // Output: value codes of tokens 2t, 2t+1 (and 2t+8, 2t+9), paired by one byte permute.
    const unsigned char* value_codes = buffer + Tile::kValueCodes;
    const uint32_t* v0 = reinterpret_cast<const uint32_t*>(value_codes + (2 * l.t) * Tile::kCodeStride);
    const uint32_t* v1 = reinterpret_cast<const uint32_t*>(value_codes + (2 * l.t + 1) * Tile::kCodeStride);
    const uint32_t* v8 = reinterpret_cast<const uint32_t*>(value_codes + (2 * l.t + 8) * Tile::kCodeStride);
    const uint32_t* v9 = reinterpret_cast<const uint32_t*>(value_codes + (2 * l.t + 9) * Tile::kCodeStride);
#pragma unroll
    for (int mt = 0; mt < 8; ++mt) {
      const int byte = (16 * mt + 2 * l.g) * Bits / 8;
      const int word = byte / 4;
      const uint32_t selector = uint32_t(byte % 4) | (uint32_t(4 + byte % 4) << 8);
      const uint32_t x = __byte_perm(v0[word], v1[word], selector);
      const uint32_t y = __byte_perm(v8[word], v9[word], selector);
      const uint32_t v[4] = {minus_1024_f16x2(and_or(x, value_mask_low, kMagic)),
                             minus_1024_f16x2(and_or(x, value_mask_high, kMagic)),
                             minus_1024_f16x2(and_or(y, value_mask_low, kMagic)),
                             minus_1024_f16x2(and_or(y, value_mask_high, kMagic))};
      mma_f16(state.acc[mt], v, weights[16 * mt / Group]);
    }
  };
  pipeline_run<Tile::kStages, Tile::kBytes>(pool, tiles.count, load, compute);
  finish_quantized_item(state, zero_acc);
  const float unscale_low = 1.0f / float(1 << value_bit);
  const float unscale_high = unscale_low / kHighFactor;
  write_warp_state(
      l, a.group, state, merge, [&](int i, int half) { return 16 * i + 2 * l.g + half; },
      [&](int i, int half, int e) {
        return state.acc[i][2 * half + e] * (half ? unscale_high : unscale_low) + zero_acc[16 * i / Group][e];
      });
}

// ---- INT2 and INT4 pages, groups of 64 or 128 channels (OSCAR's cache and its band) ----------
//
// A warp takes super-tiles (64 tokens of INT2 or 32 of INT4, four or two 16-token m-tiles: one
// pipeline stage is 8-9 KB either way, three fit its pool) round-robin, so the softmax, the pipeline
// and the page lookups are paid once per super-tile and the m-tiles' mma chains overlap. Codes come
// from shared memory through ldmatrix (keys) and ldmatrix.trans (values) in 16-byte chunks of a
// token's codes and are unpacked without a subtraction: the codes of a half-word that lie in bits
// 0-9 (INT2: 0-4, INT4: 0-1) are or-ed in place into the f16 64.0, which reads 64 + c/16,
// 64 + c/4, 64 + c, 64 + 4c or 64 + 16c exactly, and the others the same after one shift (the
// 64.0's exponent occupies bits 10-14). The query is divided by that factor, and the constant 64 is
// taken out per group: 64 * (sum of the f16 query), computed once per item, is where the scores'
// accumulation starts; 64 * (sum of the f16 weights) for the outputs, by one more mma against ones
// per m-tile. The constant is at most 1024x a code step, so the f32 accumulation keeps ~14 bits of
// the codes' contribution, finer than the f16 query (11 bits) and the f16 weights it multiplies.
// INT2 is the cache's format; INT4 is an INT4 cache's and the band's (whose items took the
// word-load path before: a 32K x 8 decode step 8% slower with the band than without).
constexpr uint32_t kMagic64 = 0x54005400u;  // f16x2 (64, 64)
constexpr uint32_t kOnes = 0x3c003c00u;     // f16x2 (1, 1)

// How codes of `Bits` bits sit in a token's row and in the registers ldmatrix fills.
template <int Bits>
struct PackedCodes {
  static_assert(Bits == 2 || Bits == 4, "packed codes are INT2 or INT4");
  static constexpr int kChunks = Bits;                       // 16-byte chunks of a token's 128 channels
  static constexpr int kRowBytes = 16 * kChunks;             // one token's codes
  static constexpr int kChunkChannels = kHeadDim / kChunks;  // channels of a chunk
  static constexpr int kLoads = kChunks / 2;                 // ldmatrix x4 loads per m-tile (two chunks each)
  static constexpr int kHalfWordCodes = 16 / Bits;           // a register's extractions
  static constexpr int kTilesPerChunk = kHalfWordCodes / 2;  // k-tiles (keys) or m-tiles (values) of a chunk
  static constexpr int kSuperTokens = Bits == 2 ? 64 : 32;
  static constexpr int kMTiles = kSuperTokens / kTileTokens;
  static constexpr int kInPlace = Bits == 2 ? 5 : 2;  // codes of a half-word in bits 0-9
  static constexpr int kShift = Bits == 2 ? 6 : 8;    // moves the others into bits 0-9

  // Rows of codes are kRowBytes; chunk c of row r is stored at chunk c ^ ((r / (8 / kChunks)) %
  // kChunks), so that the eight rows of an ldmatrix hit eight distinct groups of four banks.
  static __device__ __forceinline__ uint32_t row_chunk(int row, int chunk) {
    return row * kRowBytes + ((chunk ^ ((row / (8 / kChunks)) % kChunks)) << 4);
  }
  // Extraction e (0..kHalfWordCodes-1) of a register: code e of each half-word (bits Bits * e) lies
  // at bit `bit(e)` of `shifted[source(e)]` = {x, x >> kShift}, read as 64 + factor(e) * code with
  // factor 2^(bit - 4): one shift serves the codes of a register.
  static __device__ __forceinline__ int extract_source(int e) { return e < kInPlace ? 0 : 1; }
  static __device__ __forceinline__ int extract_bit(int e) { return e < kInPlace ? Bits * e : Bits * e - kShift; }
  static __device__ __forceinline__ float extract_factor(int e) { return float(1 << extract_bit(e)) / 16.f; }
  static __device__ __forceinline__ void shift_codes(uint32_t x, uint32_t (&shifted)[2]) {
    shifted[0] = x;
    shifted[1] = x >> kShift;
  }
  static __device__ __forceinline__ uint32_t extract_codes(const uint32_t (&shifted)[2], int e) {
    const uint32_t mask = (((1u << Bits) - 1) << extract_bit(e)) * 0x00010001u;
    return and_or(shifted[extract_source(e)], mask, kMagic64);
  }
  // The two extractions of tile k (0..kTilesPerChunk-1) of a chunk. INT2: (0, 3), (1, 4), (2, 5),
  // (6, 7); INT4: (0, 1), (2, 3).
  static __device__ __forceinline__ int pair_first(int k) { return Bits == 4 ? 2 * k : (k < 3 ? k : 6); }
  static __device__ __forceinline__ int pair_second(int k) { return Bits == 4 ? 2 * k + 1 : (k < 3 ? k + 3 : 7); }

  // The eight tiles of one ldmatrix load of codes (chunks 2L, 2L + 1 of 16 rows): `mma(tile, a)`
  // for tile kTilesPerChunk * h + k of the load, its A operand from registers r[2h], r[2h + 1] and
  // extractions pair_first(k), pair_second(k). Keys (rows are tokens): the registers are tokens g
  // and g + 8, the extractions the two halves of k. Values (rows are channels): the extractions are
  // rows g and g + 8, the registers the two halves of k.
  template <bool RowsAreTokens, typename Mma>
  static __device__ __forceinline__ void for_each_tile(const uint32_t (&r)[4], Mma mma) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      uint32_t first[2], second[2];
      shift_codes(r[2 * h], first);
      shift_codes(r[2 * h + 1], second);
#pragma unroll
      for (int k = 0; k < kTilesPerChunk; ++k) {
        const int e1 = pair_first(k), e2 = pair_second(k);
        const uint32_t a[4] = {
            extract_codes(first, e1), extract_codes(RowsAreTokens ? second : first, RowsAreTokens ? e1 : e2),
            extract_codes(RowsAreTokens ? first : second, RowsAreTokens ? e2 : e1), extract_codes(second, e2)};
        mma(kTilesPerChunk * h + k, a);
      }
    }
  }
};

// A stage holds a super-tile as stored: key codes, value codes, key parameters, value parameters
// (the parameters token-major, so the value parameters follow the key parameters' super-tile).
// q8 parameters are also decoded once per super-tile into (scale, zero) float pairs at the end of
// the pool: the four lanes that share a row would each decode the same ones, a table lookup, a
// conversion and two multiplies each; f16 and bf16 pairs convert in one or two instructions.
template <int Bits, int Group, ParamFormat Format>
struct PackedTile {
  using Codes = PackedCodes<Bits>;
  static constexpr int kSuperTokens = Codes::kSuperTokens;
  static constexpr int kMTiles = Codes::kMTiles;
  static constexpr int kGroups = kHeadDim / Group;
  static constexpr int kParamBytes = Format == ParamFormat::q8 ? 2 : 4;
  static constexpr int kMTileCodeBytes = kTileTokens * Codes::kRowBytes;        // 512 or 1024
  static constexpr int kMTileParamBytes = kTileTokens * kGroups * kParamBytes;  // 32 to 128
  static constexpr int kKeyCodes = 0;
  static constexpr int kValueCodes = kSuperTokens * Codes::kRowBytes;
  static constexpr int kKeyParams = 2 * kSuperTokens * Codes::kRowBytes;
  static constexpr int kValueParams = kKeyParams + kMTiles * kMTileParamBytes;
  static constexpr int kBytes = kValueParams + kMTiles * kMTileParamBytes;
  static constexpr bool kDecodesParams = Format == ParamFormat::q8;
  static constexpr int kParamsPerSuperTile = 2 * kSuperTokens * kGroups;  // keys', then values'
  static constexpr int kDecodedBytes = kDecodesParams ? kParamsPerSuperTile * 8 : 0;
  static constexpr int kStages = (kPoolBytes - kDecodedBytes) / kBytes;
  static_assert(kMTileParamBytes % 16 == 0 && kMTileParamBytes <= 16 * 16 && kStages >= 3, "packed tile");
  // The channel group of tile `tile` (k-tile of the keys, m-tile of the values).
  static __device__ __forceinline__ int group_of_tile(int tile) {
    return tile / Codes::kTilesPerChunk * Codes::kChunkChannels / Group;
  }
};

// The parameters of row `row` (0..15) of m-tile i of the super-tile in `buffer`, group grp.
template <int Bits, int Group, ParamFormat Format>
struct PackedParams {
  using Tile = PackedTile<Bits, Group, Format>;
  float2* decoded;  // the warp's decoded pairs (q8)
  const float* q8_scales;

  // q8: decodes the super-tile's parameters, each lane every 32nd. The pipeline's __syncwarp
  // before each super-tile orders these writes after the previous super-tile's reads. Every
  // load (the pairs, then their table entries) comes before the first store: the compiler cannot
  // move a shared-memory load above a shared-memory store, and one pair at a time chained two
  // load round trips per pair (Nsight Compute: a tenth of the INT2 kernel's stall samples).
  __device__ __forceinline__ void prepare(const unsigned char* buffer, int lane) const {
    if constexpr (Tile::kDecodesParams) {
      static_assert(Tile::kParamsPerSuperTile % 32 == 0);
      constexpr int kPerLane = Tile::kParamsPerSuperTile / 32;
      uint32_t pairs[kPerLane];
#pragma unroll
      for (int k = 0; k < kPerLane; ++k) {
        pairs[k] = *reinterpret_cast<const uint16_t*>(buffer + Tile::kKeyParams + (lane + 32 * k) * Tile::kParamBytes);
      }
      DeviceParams p[kPerLane];
#pragma unroll
      for (int k = 0; k < kPerLane; ++k) p[k] = decode_q8_params(pairs[k], q8_scales);
#pragma unroll
      for (int k = 0; k < kPerLane; ++k) decoded[lane + 32 * k] = make_float2(p[k].scale, p[k].zero);
      __syncwarp();
    }
  }
  __device__ __forceinline__ DeviceParams get(const unsigned char* buffer, bool value, int i, int row,
                                              int grp) const {
    const int index =
        (value ? Tile::kSuperTokens * Tile::kGroups : 0) + (kTileTokens * i + row) * Tile::kGroups + grp;
    if constexpr (Tile::kDecodesParams) {
      const float2 pair = decoded[index];
      return {pair.x, pair.y};
    }
    return load_params<Format>(buffer + Tile::kKeyParams + index * Tile::kParamBytes, q8_scales);
  }
};

// `Band`: the band's pages (AttentionArgs::band_layout and band_pages, PageIds::band) instead of
// the cache's quantized ones.
//
// `Paired` (GQA groups of at most four heads, Qwen3-4B/8B and Llama-3.1-8B among them): the score
// mma's columns 4-7, which would hold no head, hold the next m-tile's scores. The query fills both
// halves of the B operand (lane g holds head g & 3), each m-tile's mma give its scores in both, and
// lanes t < 2 keep m-tile 2p's (columns 0-3), lanes t >= 2 m-tile 2p + 1's (columns 4-7): the
// parameters, the softmax and the weights are computed once per pair of m-tiles instead of once per
// m-tile, by every lane. The value mma of m-tile 2p takes the weights of columns 0-3 only (the others
// zero), that of 2p + 1 those of columns 4-7, so the outputs' columns 0-3 and 4-7 are two softmax
// states of the same heads over alternate m-tiles, merged like two warps' (kPairedStates).
template <int Bits, int Group, ParamFormat Format, bool Band = false, bool Paired = false>
__device__ void process_packed_item(const ItemContext& c, WarpState& state, unsigned char* pool, float* merge) {
  using Codes = PackedCodes<Bits>;
  using Tile = PackedTile<Bits, Group, Format>;
  constexpr int kGroups = Tile::kGroups;
  constexpr int kSuperTokens = Tile::kSuperTokens;
  constexpr int kMTiles = Tile::kMTiles;
  constexpr int kTilesPerLoad = 2 * Codes::kTilesPerChunk;
  const Lane l = this_lane();
  const AttentionArgs& a = *c.args;
  const PageLayout& layout = Band ? a.band_layout : a.layout;
  const std::byte* arena = Band ? a.band_pages : a.quantized_pages;
  const int page_size = int(layout.page_size_tokens);
  const int begin = c.item.begin, end = c.item.end;
  const WarpTiles<kSuperTokens> tiles(c.item, l.warp);
  // m-tile i of super-tile j overlaps [begin, end) (the others are neither loaded nor computed).
  auto live = [&](int start, int i) { return start + kTileTokens * (i + 1) > begin && start + kTileTokens * i < end; };
  auto page_id = [&](int page_index) {
    const PageIds ids = a.page_table[c.item.page_table + page_index];
    return Band ? ids.band : ids.quantized;
  };
  // The page ids of the warp's tiles (TilePageIds) and the first tiles' copies, then the query's
  // conversion; its loads before or after the copies (QueryValues says why).
  auto query_channel = [&](int kt, int half) {
    const int chunk = kt / Codes::kTilesPerChunk, k = kt % Codes::kTilesPerChunk;
    const int e = half ? Codes::pair_second(k) : Codes::pair_first(k);
    return chunk * Codes::kChunkChannels + 2 * Codes::kHalfWordCodes * l.t + e;
  };
  QueryValues query(c, Paired ? l.g & 3 : l.g, loads_query_first(tiles), [&](int i) {
    return query_channel(i / 4, i / 2 % 2) + (i & 1) * Codes::kHalfWordCodes;
  });
  TilePageIds page_ids(tiles.count, [&](int k) { return page_id(page_position(tiles.position(k), page_size).page); });

  // Copies: lane L takes 16-byte chunk L (and L + 32, ...) of an m-tile's key codes and of its
  // value codes, rows kRowsPerCopy apart; lanes below 2 * param chunks take one chunk of the key or
  // the value parameters. Offsets inside a page are 32-bit (a page of 4096 tokens of 64 KV heads is
  // 18 MB of INT2).
  constexpr int kCopiesPerMTile = Codes::kChunks / 2;
  constexpr int kRowsPerCopy = 32 / Codes::kChunks;
  constexpr int kParamChunks = Tile::kMTileParamBytes / 16;
  constexpr int kParamBytesPerToken = kGroups * Tile::kParamBytes;
  const int code_row = l.lane / Codes::kChunks, code_chunk = l.lane % Codes::kChunks;
  const uint32_t code_destination = Codes::row_chunk(code_row, code_chunk);
  const uint32_t head_codes = uint32_t(c.kv_head * page_size + code_row) * Codes::kRowBytes + code_chunk * 16;
  const uint32_t key_codes = uint32_t(layout.key_codes_offset) + head_codes;
  const uint32_t value_codes = uint32_t(layout.value_codes_offset) + head_codes;
  const bool copies_params = l.lane < 2 * kParamChunks;
  const bool copies_value_params = l.lane >= kParamChunks;
  const uint32_t param_source =
      copies_value_params
          ? uint32_t(layout.value_params_offset + c.kv_head * layout.value_param_pairs_per_head * Tile::kParamBytes)
          : uint32_t(layout.key_params_offset + c.kv_head * layout.key_param_pairs_per_head * Tile::kParamBytes);
  const uint32_t param_destination =
      (copies_value_params ? Tile::kValueParams : Tile::kKeyParams) + (l.lane % kParamChunks) * 16;
  const uint32_t param_chunk_offset = (l.lane % kParamChunks) * 16;
  // An m-tile's copies from its first row's key codes, value codes and parameters (the lane's).
  auto copy_m_tile = [&](uint32_t base, int i, const std::byte* keys, const std::byte* values,
                         const std::byte* params_at) {
#pragma unroll
    for (int copy = 0; copy < kCopiesPerMTile; ++copy) {
      const int rows = copy * kRowsPerCopy * Codes::kRowBytes;
      cp_async_16(base + Tile::kKeyCodes + Tile::kMTileCodeBytes * i + code_destination + rows, keys + rows);
      cp_async_16(base + Tile::kValueCodes + Tile::kMTileCodeBytes * i + code_destination + rows, values + rows);
    }
    if (copies_params) cp_async_16(base + param_destination + i * Tile::kMTileParamBytes, params_at);
  };

  // Pages of a power of two >= kSuperTokens tokens hold whole super-tiles: those inside
  // [begin, end) (all but an item's first and last) take one page lookup and one address per kind,
  // the m-tiles at constant offsets from it. (The general loop below spent ~140 instructions a
  // super-tile, a sixth of the INT2 kernel's, on page and address arithmetic.)
  const bool whole_pages = (page_size & (page_size - 1)) == 0 && page_size >= kSuperTokens;
  auto load = [&](int j, unsigned char* buffer) {
    const int start = tiles.position(j);
    const uint32_t base = shared_address(buffer);
    if (whole_pages && start >= begin && start + kSuperTokens <= end) {
      const uint32_t slot = uint32_t(page_position(start, page_size).slot);
      const std::byte* page = arena + int64_t(page_ids.get(j)) * layout.quantized_page_bytes;
      const std::byte* keys = page + (key_codes + slot * Codes::kRowBytes);
      const std::byte* values = page + (value_codes + slot * Codes::kRowBytes);
      const std::byte* params_at = page + (param_source + slot * kParamBytesPerToken + param_chunk_offset);
#pragma unroll
      for (int i = 0; i < kMTiles; ++i) {
        copy_m_tile(base, i, keys + Tile::kMTileCodeBytes * i, values + Tile::kMTileCodeBytes * i,
                    params_at + Tile::kMTileParamBytes * i);
      }
      return;
    }
    const PagePosition first_at = page_position(start, page_size);
    int page_index = first_at.page, slot = first_at.slot;
    // One page lookup per page.
    int looked_up = -1;
    const std::byte* page = nullptr;
#pragma unroll
    for (int i = 0; i < kMTiles; ++i, slot += kTileTokens) {
      if (slot >= page_size) slot -= page_size, ++page_index;  // pages hold a multiple of 16 tokens
      if (!live(start, i)) continue;
      if (page_index != looked_up) {
        looked_up = page_index;
        page = arena + int64_t(page_id(page_index)) * layout.quantized_page_bytes;
      }
      const uint32_t codes_at = uint32_t(slot) * Codes::kRowBytes;
      copy_m_tile(base, i, page + (key_codes + codes_at), page + (value_codes + codes_at),
                  page + (param_source + uint32_t(slot) * kParamBytesPerToken + param_chunk_offset));
    }
  };

  pipeline_start<Tile::kStages, Tile::kBytes>(pool, tiles.count, load);
  query.load_late();

  // Score mma B operand: lane (g, t), head g, k-tile kt of chunk q = kt / kTilesPerChunk, channels
  // q * kChunkChannels + 2 * kHalfWordCodes * t + {e1, e1 + kHalfWordCodes | e2, e2 + kHalfWordCodes}
  // (e1, e2 = pair_first(k), pair_second(k) of k = kt % kTilesPerChunk), each divided by its
  // extraction factor; the sums that take the constant 64 and the zero points out, per group, for
  // head g.
  uint32_t q_b[8][2];
  float offset_part[kGroups], q_sum_part[kGroups];
#pragma unroll
  for (int grp = 0; grp < kGroups; ++grp) offset_part[grp] = q_sum_part[grp] = 0.f;
#pragma unroll
  for (int kt = 0; kt < 8; ++kt) {
    const int k = kt % Codes::kTilesPerChunk;
    const int grp = Tile::group_of_tile(kt);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int e = half ? Codes::pair_second(k) : Codes::pair_first(k);
      const float x0 = query.x[4 * kt + 2 * half] * a.score_scale;
      const float x1 = query.x[4 * kt + 2 * half + 1] * a.score_scale;
      q_b[kt][half] = pack_f16x2(x0 / Codes::extract_factor(e), x1 / Codes::extract_factor(e));
      const float2 rounded = unpack_f16x2(q_b[kt][half]);
      offset_part[grp] += 64.f * (rounded.x + rounded.y);
      q_sum_part[grp] += x0 + x1;
    }
  }
  // Lane (g, t) scores heads 2t and 2t + 1 (Paired: (2t, 2t + 1) & 3): gather their sums from the
  // lanes holding them.
  auto column_head = [&](int e) { return Paired ? (2 * l.t + e) & 3 : 2 * l.t + e; };
  float offset[kGroups][2], q_sum[kGroups][2];
#pragma unroll
  for (int grp = 0; grp < kGroups; ++grp) {
    offset_part[grp] += __shfl_xor_sync(0xffffffffu, offset_part[grp], 1);
    offset_part[grp] += __shfl_xor_sync(0xffffffffu, offset_part[grp], 2);
    q_sum_part[grp] += __shfl_xor_sync(0xffffffffu, q_sum_part[grp], 1);
    q_sum_part[grp] += __shfl_xor_sync(0xffffffffu, q_sum_part[grp], 2);
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      offset[grp][e] = __shfl_sync(0xffffffffu, offset_part[grp], 4 * column_head(e));
      q_sum[grp][e] = __shfl_sync(0xffffffffu, q_sum_part[grp], 4 * column_head(e));
    }
  }
  float zero_acc[kGroups][2];     // sum of p * value zero point
  float weight_sum[kGroups][4];   // sum of the f16 weights p * value scale ([0], [1] used)
#pragma unroll
  for (int grp = 0; grp < kGroups; ++grp) {
    zero_acc[grp][0] = zero_acc[grp][1] = 0.f;
    weight_sum[grp][0] = weight_sum[grp][1] = weight_sum[grp][2] = weight_sum[grp][3] = 0.f;
  }

  // ldmatrix rows of load L: lanes 0-7 tokens 0-7 and 8-15 tokens 8-15 of chunk 2L, lanes 16-31
  // the same tokens of chunk 2L + 1 (matrices 0-3 of the x4 load); m-tile i is i * kMTileCodeBytes
  // further.
  uint32_t matrix_row[Codes::kLoads];
#pragma unroll
  for (int load = 0; load < Codes::kLoads; ++load) {
    matrix_row[load] = Codes::row_chunk((l.lane & 7) + ((l.lane >> 3) & 1) * 8, 2 * load + (l.lane >> 4));
  }

  // Super-tiles inside [begin, end) take a branch-free body, so that the m-tiles' mma chains can be
  // interleaved; the first and last ones skip or mask what lies outside.
  const PackedParams<Bits, Group, Format> params{reinterpret_cast<float2*>(pool + kPoolBytes - Tile::kDecodedBytes),
                                                 c.q8_scales};
  constexpr int kScoreSets = Paired ? kMTiles / 2 : kMTiles;  // score registers: m-tiles or pairs
  const bool upper_columns = Paired && l.t >= 2;               // this lane keeps m-tile 2p + 1's scores
  const uint32_t low_columns = l.g < 4 ? ~0u : 0u;             // lane g holds B operand column g
  // The m-tile whose scores (and weights) score set `set` holds in this lane.
  auto lane_tile = [&](int set) { return Paired ? 2 * set + int(upper_columns) : set; };
  auto compute_super_tile = [&](int start, unsigned char* buffer, auto inside) {
    constexpr bool kInside = decltype(inside)::value;
    const uint32_t codes = shared_address(buffer);
    params.prepare(buffer, l.lane);
    // The dot products of m-tile i, dot[grp] per group, rows g, g+8, heads 2t, 2t+1 (Paired: & 3).
    // Paired: zero for an m-tile outside the item (its scores are masked below).
    auto tile_dots = [&](int i, float (&dot)[2][4]) {
      if (Paired && !kInside && !live(start, i)) {
#pragma unroll
        for (int x = 0; x < 8; ++x) dot[x / 4][x % 4] = 0.f;
        return;
      }
      // The dot products start from minus the constant 64's share, so they end as sum q * code.
      // Channels 0-63 and 64-127 accumulate apart (a group of 128 adds the two), so that each
      // chain of dependent mma is four long.
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const bool starts_group = 64 * h % Group == 0;
        dot[h][0] = dot[h][2] = starts_group ? -offset[64 * h / Group][0] : 0.f;
        dot[h][1] = dot[h][3] = starts_group ? -offset[64 * h / Group][1] : 0.f;
      }
#pragma unroll
      for (int load = 0; load < Codes::kLoads; ++load) {
        // r[2h]: token g, r[2h + 1]: token g + 8, chunk 2 * load + h.
        uint32_t r[4];
        ldmatrix_x4(r, codes + Tile::kKeyCodes + Tile::kMTileCodeBytes * i + matrix_row[load]);
        Codes::template for_each_tile<true>(r, [&](int tile, const uint32_t(&ka)[4]) {
          const int kt = kTilesPerLoad * load + tile;
          mma_f16(dot[kt / 4], ka, q_b[kt]);
        });
      }
      if constexpr (kGroups == 1) {
#pragma unroll
        for (int x = 0; x < 4; ++x) dot[0][x] += dot[1][x];
      }
    };
    // Scores of the score sets: rows g, g+8 of m-tile lane_tile(set); heads 2t, 2t+1 (Paired: & 3).
    float s[kScoreSets][4];
#pragma unroll
    for (int set = 0; set < kScoreSets; ++set) {
      s[set][0] = s[set][1] = s[set][2] = s[set][3] = -INFINITY;
      if (!Paired && !kInside && !live(start, set)) continue;
      float dot[2][4];
      if constexpr (Paired) {
        float low[2][4], high[2][4];
        tile_dots(2 * set, low);
        tile_dots(2 * set + 1, high);
#pragma unroll
        for (int grp = 0; grp < kGroups; ++grp) {
#pragma unroll
          for (int x = 0; x < 4; ++x) dot[grp][x] = upper_columns ? high[grp][x] : low[grp][x];
        }
      } else {
        tile_dots(set, dot);
      }
      const int i = lane_tile(set);
      // The first group's terms start the scores (0 + x is not x for the compiler: -0).
#pragma unroll
      for (int grp = 0; grp < kGroups; ++grp) {
        const DeviceParams p0 = params.get(buffer, false, i, l.g, grp);
        const DeviceParams p1 = params.get(buffer, false, i, l.g + 8, grp);
        const float terms[4] = {p0.scale * dot[grp][0] + p0.zero * q_sum[grp][0],
                                p0.scale * dot[grp][1] + p0.zero * q_sum[grp][1],
                                p1.scale * dot[grp][2] + p1.zero * q_sum[grp][0],
                                p1.scale * dot[grp][3] + p1.zero * q_sum[grp][1]};
#pragma unroll
        for (int x = 0; x < 4; ++x) s[set][x] = grp == 0 ? terms[x] : s[set][x] + terms[x];
      }
      if (!kInside && (start + kTileTokens * i < begin || start + kTileTokens * (i + 1) > end)) {
        mask_tile(s[set], start + kTileTokens * i, l.g, begin, end);
      }
    }
    float correction[2];
    online_softmax<Paired>(s, state, correction, [&](const float (&f)[2]) {
#pragma unroll
      for (int grp = 0; grp < kGroups; ++grp) {
        zero_acc[grp][0] *= f[0];
        zero_acc[grp][1] *= f[1];
        weight_sum[grp][0] *= f[0];
        weight_sum[grp][1] *= f[1];
        weight_sum[grp][2] *= f[0];
        weight_sum[grp][3] *= f[1];
      }
    });
#pragma unroll
    for (int set = 0; set < kScoreSets; ++set) {
      if (!Paired && !kInside && !live(start, set)) continue;
      const int i = lane_tile(set);
      // Paired: the parameters of an m-tile outside the item were never copied (garbage f16 could
      // be NaN, and 0 * NaN is not 0); its weights are 0.
      const bool lane_tile_dead = Paired && !kInside && !live(start, i);
      // Weights per value group: P * scale as the B operand, P * zero summed on the side.
      uint32_t weights[kGroups][2];
#pragma unroll
      for (int grp = 0; grp < kGroups; ++grp) {
        DeviceParams p0 = params.get(buffer, true, i, l.g, grp);
        DeviceParams p1 = params.get(buffer, true, i, l.g + 8, grp);
        if (lane_tile_dead) p0 = p1 = DeviceParams{0.f, 0.f};
        zero_acc[grp][0] += s[set][0] * p0.zero + s[set][2] * p1.zero;
        zero_acc[grp][1] += s[set][1] * p0.zero + s[set][3] * p1.zero;
        weights[grp][0] = movmatrix_trans(pack_f16x2(s[set][0] * p0.scale, s[set][1] * p0.scale));
        weights[grp][1] = movmatrix_trans(pack_f16x2(s[set][2] * p1.scale, s[set][3] * p1.scale));
        const uint32_t ones[4] = {kOnes, kOnes, kOnes, kOnes};
        mma_f16(weight_sum[grp], ones, weights[grp]);
      }
      // The set's m-tiles' outputs (Paired: each with its columns' weights).
#pragma unroll
      for (int k = 0; k < (Paired ? 2 : 1); ++k) {
        const int tile = Paired ? 2 * set + k : set;
        if (Paired && !kInside && !live(start, tile)) continue;
        uint32_t b[kGroups][2];
#pragma unroll
        for (int grp = 0; grp < kGroups; ++grp) {
          const uint32_t columns = Paired ? (k ? ~low_columns : low_columns) : ~0u;
          b[grp][0] = weights[grp][0] & columns;
          b[grp][1] = weights[grp][1] & columns;
        }
        // x[2h]: tokens 2t, 2t+1 (x[2h + 1]: 2t+8, 2t+9) of chunk q = 2 * load + h, channels
        // q * kChunkChannels + kHalfWordCodes * g + (0..kHalfWordCodes-1) per half-word; m-tile
        // kTilesPerChunk * q + k: row g is that channel + pair_first(k), row g+8 + pair_second(k).
#pragma unroll
        for (int load = 0; load < Codes::kLoads; ++load) {
          uint32_t x[4];
          ldmatrix_x4_trans(x, codes + Tile::kValueCodes + Tile::kMTileCodeBytes * tile + matrix_row[load]);
          Codes::template for_each_tile<false>(x, [&](int mtile, const uint32_t(&va)[4]) {
            const int mt = kTilesPerLoad * load + mtile;
            mma_f16(state.acc[mt], va, b[Tile::group_of_tile(mt)]);
          });
        }
      }
    }
  };
  auto compute = [&](int j, unsigned char* buffer) {
    const int start = tiles.position(j);
    if (start >= begin && start + kSuperTokens <= end) {
      compute_super_tile(start, buffer, std::true_type{});
    } else {
      compute_super_tile(start, buffer, std::false_type{});
    }
  };
  pipeline_run<Tile::kStages, Tile::kBytes>(pool, tiles.count, load, compute);
  finish_quantized_item(state, zero_acc);
  // Output m-tile i: chunk q = i / kTilesPerChunk, extraction pair k = i % kTilesPerChunk.
  auto extraction = [](int i, int half) {
    const int k = i % Codes::kTilesPerChunk;
    return half ? Codes::pair_second(k) : Codes::pair_first(k);
  };
  write_warp_state<Paired>(
      l, a.group, state, merge,
      [&](int i, int half) {
        return i / Codes::kTilesPerChunk * Codes::kChunkChannels + Codes::kHalfWordCodes * l.g + extraction(i, half);
      },
      [&](int i, int half, int e) {
        const int grp = Tile::group_of_tile(i);
        return (state.acc[i][2 * half + e] - 64.f * weight_sum[grp][e]) / Codes::extract_factor(extraction(i, half)) +
               zero_acc[grp][e];
      });
}

// ---- the kernel ---------------------------------------------------------------------------------

// The States states of one item (the four warps', or kPairedStates), merged into its partial record.
template <int States>
__device__ void merge_warps(const AttentionArgs& a, const DecodeItem& item, int kv_head, const float* merge) {
  const int group = a.group;
  const int slice = group * (kHeadDim + 2);
  float* record = a.partials + int64_t(item.partial + kv_head) * slice;
  for (int index = threadIdx.x; index < group * kHeadDim; index += kThreads) {
    const int head = index / kHeadDim, ch = index % kHeadDim;
    float max = -INFINITY;
#pragma unroll
    for (int w = 0; w < States; ++w) max = fmaxf(max, merge[w * slice + head]);
    float sum = 0.f, out = 0.f;
#pragma unroll
    for (int w = 0; w < States; ++w) {
      const float f = fast_exp2(merge[w * slice + head] - max);
      sum += merge[w * slice + group + head] * f;
      out += merge[w * slice + 2 * group + head * kHeadDim + ch] * f;
    }
    record[2 * group + head * kHeadDim + ch] = out;
    if (ch == 0) {
      record[head] = max;
      record[group + head] = sum;
    }
  }
}

// Blocks take (item, KV head) units beyond the first wave in turn from work_counter[0];
// work_counter[1] counts the blocks that are done. One pair per device: launches of this kernel
// must not overlap, which holds for the backend's single stream (and its graph), the benchmark
// and the tests.
__device__ int work_counter[2];

constexpr int kPoolsBytes = kWarps * kPoolBytes;
// The next unit's index and descriptor (written by thread 0 during the merge, read by all after it).
struct NextUnit {
  int work;
  DecodeItem item;
};
constexpr int kNextUnitOffset = kPoolsBytes + kQ8ScaleCount * sizeof(float);
// The pools, the q8 scale table, the next unit: all of the kernel's shared memory is dynamic, so
// that the pools start on a 128-byte line. Static shared variables (32 bytes of them at
// 8977ef4) shift the dynamic area by their size, and the 128 bytes that eight lanes copy at once
// then straddle two lines: bf16 decode attention ran 1.3-4.7% slower and INT2 up to 2% (H100 and
// H200; Nsight Compute: the same instructions and bytes, longer waits for the copies).
constexpr int kSharedBytes = kNextUnitOffset + int(sizeof(NextUnit));

// The states a paired packed item leaves in the merge area: two per warp (process_packed_item).
constexpr int kPairedStates = 2 * kWarps;
static_assert(kPairedStates * 4 * (kHeadDim + 2) * 4 <= kPoolsBytes, "paired merge area fits the pools");

// The super-tile path; returns the states it left in the merge area.
template <int Bits, int Group, ParamFormat Format, bool Band, bool Paired>
__device__ __forceinline__ int process_packed(const ItemContext& c, WarpState& state, unsigned char* pool,
                                              float* merge) {
  process_packed_item<Bits, Group, Format, Band, Paired>(c, state, pool, merge);
  return Paired ? kPairedStates : kWarps;
}

// Bits 0: bf16 pages only. Quantized items: INT2 and INT4 in groups of 64 or 128 channels take
// the super-tile path, groups of 32 the word-load path. Band items (INT2 caches only: the band's
// INT4 copies, f16 parameters, KvCacheConfig::band_config) take the path of the cache's groups.
// `Paired`: the super-tile path pairs m-tiles (process_packed_item; groups of at most four heads).
// Returns the states left in the merge area.
template <int Bits, int Group, ParamFormat Format, bool Paired>
__device__ __forceinline__ int process_item(const ItemContext& c, WarpState& state, unsigned char* pool,
                                            float* merge) {
  if constexpr (Bits == 0) {
    process_full_item(c, state, pool, merge);
  } else {
    constexpr bool kSuperTiles = Group >= 64;
    if (c.item.pages == KeyPages::full) {
      process_full_item(c, state, pool, merge);
    } else if (c.item.pages == KeyPages::band) {
      if constexpr (Bits == 2 && kSuperTiles) {
        return process_packed<4, Group, ParamFormat::f16, /*Band=*/true, Paired>(c, state, pool, merge);
      } else if constexpr (Bits == 2) {
        process_quantized_item<4, Group, ParamFormat::f16, /*Band=*/true>(c, state, pool, merge);
      }
    } else if constexpr (kSuperTiles) {
      return process_packed<Bits, Group, Format, /*Band=*/false, Paired>(c, state, pool, merge);
    } else {
      process_quantized_item<Bits, Group, Format>(c, state, pool, merge);
    }
  }
  return kWarps;
}

template <int Bits, int Group, ParamFormat Format, bool Paired>
__global__ void __launch_bounds__(kThreads, 3) decode_attention_kernel(const AttentionArgs args) {
  extern __shared__ __align__(128) unsigned char shared[];
  const Lane l = this_lane();
  unsigned char* pool = shared + l.warp * kPoolBytes;
  float* merge = reinterpret_cast<float*>(shared);
  float* q8_scales = reinterpret_cast<float*>(shared + kPoolsBytes);
  NextUnit& next = *reinterpret_cast<NextUnit*>(shared + kNextUnitOffset);
  if constexpr (Bits > 0 && Format == ParamFormat::q8) {
    for (int i = threadIdx.x; i < kQ8ScaleCount; i += kThreads) q8_scales[i] = args.q8_scales[i];
    __syncthreads();
  }
  // The work list is the step's plan (uploaded before the step), not an earlier kernel's output:
  // the first unit's descriptor is read before waiting for the kernel before this one, while its
  // last blocks run. (H100, with and without, medians of three runs: INT2 4K x 1 13.0 -> 12.5 us,
  // 32K x 1 20.2 -> 19.5, 4K x 8 25.7 -> 25.2; the longer launches within +-0.8%.)
  const int work_units = args.counts->decode_items * args.num_kv_heads;
  // The first wave takes units blockIdx.x; each later unit is claimed while the current one runs,
  // so that the atomic's round trip is hidden, and its descriptor is read while the current one's
  // warps merge: a unit's first copies wait on one round trip (its page ids), not three (the
  // descriptor, then its row, then the page ids).
  int work = blockIdx.x;
  DecodeItem item = work < work_units ? args.decode_items[work / args.num_kv_heads] : DecodeItem{};
  wait_for_producer();
  while (work < work_units) {
    int claimed = 0;
    if (threadIdx.x == 0) claimed = int(gridDim.x) + atomicAdd(&work_counter[0], 1);
    const int kv_head = work % args.num_kv_heads;
    const ItemContext context{&args, item, kv_head, q8_scales};
    WarpState state;
    state.reset();
    const int states = process_item<Bits, Group, Format, Paired>(context, state, pool, merge);
    __syncthreads();
    DecodeItem following{};
    if (threadIdx.x == 0 && claimed < work_units) following = args.decode_items[claimed / args.num_kv_heads];
    if (Paired && states == kPairedStates) {
      merge_warps<kPairedStates>(args, item, kv_head, merge);
    } else {
      merge_warps<kWarps>(args, item, kv_head, merge);
    }
    if (threadIdx.x == 0) {
      next.work = claimed;
      next.item = following;
    }
    __syncthreads();  // the next unit is written; the merge area is the next unit's pipeline
    work = next.work;
    item = next.item;
  }
  // Not earlier: the combine's blocks, waiting beside this kernel's for its whole run, made INT2
  // decode steps of batch 4-8 5-18% slower on the H100.
  release_consumer();
  // The last block out resets the counters for the next launch: every other block has taken its
  // final index by then.
  if (threadIdx.x == 0 && atomicAdd(&work_counter[1], 1) == int(gridDim.x) - 1) {
    work_counter[0] = 0;
    work_counter[1] = 0;
  }
}

using KernelPointer = void (*)(AttentionArgs);

template <int Bits, int Group, bool Paired>
KernelPointer kernel_for_format(ParamFormat format) {
  if (format == ParamFormat::q8) return decode_attention_kernel<Bits, Group, ParamFormat::q8, Paired>;
  if (format == ParamFormat::bf16) return decode_attention_kernel<Bits, Group, ParamFormat::bf16, Paired>;
  return decode_attention_kernel<Bits, Group, ParamFormat::f16, Paired>;
}

// Paired kernels exist for the super-tile path only (groups of 64 or 128).
template <int Bits>
KernelPointer kernel_for_group(const PageLayout& layout, bool paired) {
  if (layout.group_size == 32) return kernel_for_format<Bits, 32, false>(layout.param_format);
  if (layout.group_size == 64) {
    return paired ? kernel_for_format<Bits, 64, true>(layout.param_format)
                  : kernel_for_format<Bits, 64, false>(layout.param_format);
  }
  return paired ? kernel_for_format<Bits, 128, true>(layout.param_format)
                : kernel_for_format<Bits, 128, false>(layout.param_format);
}

KernelPointer kernel_for(const PageLayout& layout, bool paired) {
  if (layout.bits == 2) return kernel_for_group<2>(layout, paired);
  if (layout.bits == 4) return kernel_for_group<4>(layout, paired);
  return decode_attention_kernel<0, 128, ParamFormat::f16, false>;
}

static_assert(kWarps * kMaxGroup * (kHeadDim + 2) * 4 <= kPoolsBytes, "merge area fits the pools");

KernelPointer prepared_kernel(const PageLayout& layout, bool paired) {
  const KernelPointer kernel = kernel_for(layout, paired);
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes),
        "cudaFuncSetAttribute(decode_attention)");
  return kernel;
}

}  // namespace

bool decode_attention_supports(const PageLayout& layout, int group) {
  const bool format_ok = layout.bits == 0 || ((layout.bits == 2 || layout.bits == 4) && !layout.keys_per_channel);
  return layout.head_dim == kHeadDim && group >= 1 && group <= kMaxGroup && layout.element_bytes == 2 &&
         layout.page_size_tokens % kTileTokens == 0 && format_ok;
}

// Both kernels of a layout (paired or not) are held to 3 blocks an SM by their launch bounds, with
// the same shared memory: the unpaired one's count is either's.
int decode_attention_resident_blocks(const PageLayout& layout) {
  const KernelPointer kernel = prepared_kernel(layout, /*paired=*/false);
  int device = 0, multiprocessors = 0, per_multiprocessor = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_multiprocessor, kernel, kThreads, kSharedBytes),
        "cudaOccupancyMaxActiveBlocksPerMultiprocessor(decode_attention)");
  return multiprocessors * per_multiprocessor;
}

void launch_decode_attention(const AttentionArgs& args, int grid_blocks, cudaStream_t stream) {
  const KernelPointer kernel = prepared_kernel(args.layout, args.pair_m_tiles && args.group <= 4);
  launch_chained("decode_attention_kernel", kernel, dim3(unsigned(grid_blocks)), dim3(kThreads), kSharedBytes, stream,
                 args);
}

}  // namespace oscar::cuda
