#pragma once
// The decode attention kernel's path over bf16 pages (the sink, the recent window, a bf16 cache):
// 16-token tiles through ldmatrix, the query and the weights as bf16 high + low halves.
#include "backend/cuda/decode_attention_warp.cuh"

namespace oscar::cuda::decode {

// Full-precision tile: 16 key rows then 16 value rows of 256 bytes; the 16-byte chunk c of row r
// is stored at chunk c ^ (r % 8) so that ldmatrix's eight rows hit eight distinct bank groups.
constexpr int kFullRowBytes = kHeadDim * 2;
constexpr int kFullTileBytes = 2 * kTileTokens * kFullRowBytes;
constexpr int kFullStages = kPoolBytes / kFullTileBytes;

__device__ inline void process_full_item(const ItemContext& c, WarpState& state,
                                         unsigned char* pool, float* merge) {
  const Lane l = this_lane();
  const WarpTiles<kTileTokens> tiles(c.item, l.warp);
  const AttentionArgs& a = *c.args;
  const PageLayout& layout = a.layout;
  // Lane L copies 16-byte chunk L % 16 of rows L / 16 + 2i: one source address per tile, the
  // others at constant offsets (32-bit offsets inside a page, computed once per item).
  const uint32_t head_keys = uint32_t(layout.full_key_offset(c.kv_head, 0)) +
                             (l.lane >> 4) * kFullRowBytes + (l.lane & 15) * 16;
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
    const std::byte* keys = a.full_pages + int64_t(page) * layout.full_page_bytes +
                            (head_keys + uint32_t(at.slot) * kFullRowBytes);
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

}  // namespace oscar::cuda::decode
