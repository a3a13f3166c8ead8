#pragma once
// The decode attention kernel's super-tile path: INT2 and INT4 pages in groups of 64 or 128
// channels (OSCAR's cache and its 4-bit band), codes unpacked in registers
// (decode_packed_codes.cuh).
#include <type_traits>

#include "backend/cuda/decode_packed_codes.cuh"

namespace oscar::cuda::decode {

// A lane's copies of a packed item's m-tiles: lane L takes 16-byte chunk L (and L + 32, ...) of an
// m-tile's key codes and of its value codes, rows kRowsPerCopy apart; lanes below 2 * param chunks
// take one chunk of the key or the value parameters. Offsets inside a page are 32-bit (a page of
// 4096 tokens of 64 KV heads is 18 MB of INT2).
template <int Bits, int Group, ParamFormat Format>
struct PackedCopies {
  using Codes = PackedCodes<Bits>;
  using Tile = PackedTile<Bits, Group, Format>;
  static constexpr int kCopiesPerMTile = Codes::kChunks / 2;
  static constexpr int kRowsPerCopy = 32 / Codes::kChunks;
  static constexpr int kParamChunks = Tile::kMTileParamBytes / 16;
  static constexpr int kParamBytesPerToken = Tile::kGroups * Tile::kParamBytes;

  uint32_t code_destination, key_codes, value_codes;
  bool copies_params;
  uint32_t param_source, param_destination, param_chunk_offset;

  __device__ PackedCopies(const PageLayout& layout, int kv_head, int page_size, int lane) {
    const int code_row = lane / Codes::kChunks, code_chunk = lane % Codes::kChunks;
    code_destination = Codes::row_chunk(code_row, code_chunk);
    const uint32_t head_codes =
        uint32_t(kv_head * page_size + code_row) * Codes::kRowBytes + code_chunk * 16;
    key_codes = uint32_t(layout.key_codes_offset) + head_codes;
    value_codes = uint32_t(layout.value_codes_offset) + head_codes;
    copies_params = lane < 2 * kParamChunks;
    const bool copies_value_params = lane >= kParamChunks;
    param_source = copies_value_params
                       ? uint32_t(layout.value_params_offset +
                                  kv_head * layout.value_param_pairs_per_head * Tile::kParamBytes)
                       : uint32_t(layout.key_params_offset +
                                  kv_head * layout.key_param_pairs_per_head * Tile::kParamBytes);
    param_destination =
        (copies_value_params ? Tile::kValueParams : Tile::kKeyParams) + (lane % kParamChunks) * 16;
    param_chunk_offset = (lane % kParamChunks) * 16;
  }
  // The lane's sources for the m-tile that starts at `slot` of `page`.
  __device__ __forceinline__ const std::byte* keys(const std::byte* page, uint32_t slot) const {
    return page + (key_codes + slot * Codes::kRowBytes);
  }
  __device__ __forceinline__ const std::byte* values(const std::byte* page, uint32_t slot) const {
    return page + (value_codes + slot * Codes::kRowBytes);
  }
  __device__ __forceinline__ const std::byte* params(const std::byte* page, uint32_t slot) const {
    return page + (param_source + slot * kParamBytesPerToken + param_chunk_offset);
  }
  // m-tile i's copies into the stage at `base`, from its first row's key codes, value codes and
  // parameters (the lane's).
  __device__ __forceinline__ void copy_m_tile(uint32_t base, int i, const std::byte* keys,
                                              const std::byte* values,
                                              const std::byte* params_at) const {
#pragma unroll
    for (int copy = 0; copy < kCopiesPerMTile; ++copy) {
      const int rows = copy * kRowsPerCopy * Codes::kRowBytes;
      cp_async_16(base + Tile::kKeyCodes + Tile::kMTileCodeBytes * i + code_destination + rows,
                  keys + rows);
      cp_async_16(base + Tile::kValueCodes + Tile::kMTileCodeBytes * i + code_destination + rows,
                  values + rows);
    }
    if (copies_params)
      cp_async_16(base + param_destination + i * Tile::kMTileParamBytes, params_at);
  }
};

// The score mma's B operand of a packed item and its query's sums. Lane (g, t) holds head g,
// k-tile kt of chunk q = kt / kTilesPerChunk, channels q * kChunkChannels +
// 2 * kHalfWordCodes * t + {e1, e1 + kHalfWordCodes | e2, e2 + kHalfWordCodes} (e1, e2 =
// pair_first(k), pair_second(k) of k = kt % kTilesPerChunk), each divided by its extraction factor;
// per group, for the lane's score columns (heads 2t, 2t + 1), `offset` is 64 times the f16
// query's sum (the constant 64's share) and `q_sum` the zero points' factor.
template <int Bits, int Group, ParamFormat Format>
struct PackedQuery {
  using Codes = PackedCodes<Bits>;
  using Tile = PackedTile<Bits, Group, Format>;
  static constexpr int kGroups = Tile::kGroups;

  uint32_t b[8][2];
  float offset[kGroups][2], q_sum[kGroups][2];

  // Value i of QueryValues::x: channel(l, i) of the lane's head.
  static __device__ __forceinline__ int channel(const Lane& l, int i) {
    const int kt = i / 4, half = i / 2 % 2;
    const int chunk = kt / Codes::kTilesPerChunk, k = kt % Codes::kTilesPerChunk;
    const int e = half ? Codes::pair_second(k) : Codes::pair_first(k);
    return chunk * Codes::kChunkChannels + 2 * Codes::kHalfWordCodes * l.t + e +
           (i & 1) * Codes::kHalfWordCodes;
  }

  __device__ PackedQuery(const float (&x)[32], float score_scale, const Lane& l) {
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
        const float x0 = x[4 * kt + 2 * half] * score_scale;
        const float x1 = x[4 * kt + 2 * half + 1] * score_scale;
        b[kt][half] = pack_f16x2(x0 / Codes::extract_factor(e), x1 / Codes::extract_factor(e));
        const float2 rounded = unpack_f16x2(b[kt][half]);
        offset_part[grp] += 64.f * (rounded.x + rounded.y);
        q_sum_part[grp] += x0 + x1;
      }
    }
    // Gathered from the lanes holding the heads of the lane's columns.
#pragma unroll
    for (int grp = 0; grp < kGroups; ++grp) {
      offset_part[grp] += __shfl_xor_sync(0xffffffffu, offset_part[grp], 1);
      offset_part[grp] += __shfl_xor_sync(0xffffffffu, offset_part[grp], 2);
      q_sum_part[grp] += __shfl_xor_sync(0xffffffffu, q_sum_part[grp], 1);
      q_sum_part[grp] += __shfl_xor_sync(0xffffffffu, q_sum_part[grp], 2);
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        offset[grp][e] = __shfl_sync(0xffffffffu, offset_part[grp], 4 * (2 * l.t + e));
        q_sum[grp][e] = __shfl_sync(0xffffffffu, q_sum_part[grp], 4 * (2 * l.t + e));
      }
    }
  }
};

// `Band`: the band's pages (AttentionArgs::band_layout and band_pages, PageIds::band) instead of
// the cache's quantized ones.

template <int Bits, int Group, ParamFormat Format, bool Band = false>
__device__ void process_packed_item(const ItemContext& c, WarpState& state, unsigned char* pool,
                                    float* merge) {
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
  auto live = [&](int start, int i) {
    return start + kTileTokens * (i + 1) > begin && start + kTileTokens * i < end;
  };
  auto page_id = [&](int page_index) {
    const PageIds ids = a.page_table[c.item.page_table + page_index];
    return Band ? ids.band : ids.quantized;
  };
  // The page ids of the warp's tiles (TilePageIds) and the first tiles' copies, then the query's
  // conversion; its loads before or after the copies (QueryValues says why).
  using Query = PackedQuery<Bits, Group, Format>;
  QueryValues query(c, l.g, loads_query_first(tiles), [&](int i) { return Query::channel(l, i); });
  TilePageIds page_ids(tiles.count, [&](int k) {
    return page_id(page_position(tiles.position(k), page_size).page);
  });

  const PackedCopies<Bits, Group, Format> copies(layout, c.kv_head, page_size, l.lane);

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
      const std::byte* keys = copies.keys(page, slot);
      const std::byte* values = copies.values(page, slot);
      const std::byte* params_at = copies.params(page, slot);
#pragma unroll
      for (int i = 0; i < kMTiles; ++i) {
        copies.copy_m_tile(base, i, keys + Tile::kMTileCodeBytes * i,
                           values + Tile::kMTileCodeBytes * i,
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
      copies.copy_m_tile(base, i, copies.keys(page, uint32_t(slot)),
                         copies.values(page, uint32_t(slot)), copies.params(page, uint32_t(slot)));
    }
  };

  pipeline_start<Tile::kStages, Tile::kBytes>(pool, tiles.count, load);
  query.load_late();

  const Query q(query.x, a.score_scale, l);
  float zero_acc[kGroups][2];    // sum of p * value zero point
  float weight_sum[kGroups][4];  // sum of the f16 weights p * value scale ([0], [1] used)
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
    matrix_row[load] =
        Codes::row_chunk((l.lane & 7) + ((l.lane >> 3) & 1) * 8, 2 * load + (l.lane >> 4));
  }

  // Super-tiles inside [begin, end) take a branch-free body, so that the m-tiles' mma chains can be
  // interleaved; the first and last ones skip or mask what lies outside.
  const PackedParams<Bits, Group, Format> params{
      reinterpret_cast<float2*>(pool + kPoolBytes - Tile::kDecodedBytes), c.q8_scales};
  auto compute_super_tile = [&](int start, unsigned char* buffer, auto inside) {
    constexpr bool kInside = decltype(inside)::value;
    const uint32_t codes = shared_address(buffer);
    params.prepare(buffer, l.lane);
    // Scores of m-tile i: rows g, g+8; heads 2t, 2t+1.
    float s[kMTiles][4];
#pragma unroll
    for (int i = 0; i < kMTiles; ++i) {
      s[i][0] = s[i][1] = s[i][2] = s[i][3] = -INFINITY;
      if (!kInside && !live(start, i)) continue;
      // The dot products start from minus the constant 64's share, so they end as sum q * code.
      // Channels 0-63 and 64-127 accumulate apart (a group of 128 adds the two), so that each
      // chain of dependent mma is four long.
      float dot[2][4];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const bool starts_group = 64 * h % Group == 0;
        dot[h][0] = dot[h][2] = starts_group ? -q.offset[64 * h / Group][0] : 0.f;
        dot[h][1] = dot[h][3] = starts_group ? -q.offset[64 * h / Group][1] : 0.f;
      }
#pragma unroll
      for (int load = 0; load < Codes::kLoads; ++load) {
        // r[2h]: token g, r[2h + 1]: token g + 8, chunk 2 * load + h.
        uint32_t r[4];
        ldmatrix_x4(r, codes + Tile::kKeyCodes + Tile::kMTileCodeBytes * i + matrix_row[load]);
        Codes::template for_each_tile<true>(r, [&](int tile, const uint32_t(&ka)[4]) {
          const int kt = kTilesPerLoad * load + tile;
          mma_f16(dot[kt / 4], ka, q.b[kt]);
        });
      }
      if constexpr (kGroups == 1) {
#pragma unroll
        for (int x = 0; x < 4; ++x) dot[0][x] += dot[1][x];
      }
      // The first group's terms start the scores (0 + x is not x for the compiler: -0).
#pragma unroll
      for (int grp = 0; grp < kGroups; ++grp) {
        const DeviceParams p0 = params.get(buffer, false, i, l.g, grp);
        const DeviceParams p1 = params.get(buffer, false, i, l.g + 8, grp);
        const float terms[4] = {p0.scale * dot[grp][0] + p0.zero * q.q_sum[grp][0],
                                p0.scale * dot[grp][1] + p0.zero * q.q_sum[grp][1],
                                p1.scale * dot[grp][2] + p1.zero * q.q_sum[grp][0],
                                p1.scale * dot[grp][3] + p1.zero * q.q_sum[grp][1]};
#pragma unroll
        for (int x = 0; x < 4; ++x) s[i][x] = grp == 0 ? terms[x] : s[i][x] + terms[x];
      }
      if (!kInside && (start + kTileTokens * i < begin || start + kTileTokens * (i + 1) > end)) {
        mask_tile(s[i], start + kTileTokens * i, l.g, begin, end);
      }
    }
    float correction[2];
    online_softmax(s, state, correction, [&](const float(&f)[2]) {
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
    for (int i = 0; i < kMTiles; ++i) {
      if (!kInside && !live(start, i)) continue;
      // Weights per value group: P * scale as the B operand, P * zero summed on the side.
      uint32_t weights[kGroups][2];
#pragma unroll
      for (int grp = 0; grp < kGroups; ++grp) {
        const DeviceParams p0 = params.get(buffer, true, i, l.g, grp);
        const DeviceParams p1 = params.get(buffer, true, i, l.g + 8, grp);
        zero_acc[grp][0] += s[i][0] * p0.zero + s[i][2] * p1.zero;
        zero_acc[grp][1] += s[i][1] * p0.zero + s[i][3] * p1.zero;
        weights[grp][0] = movmatrix_trans(pack_f16x2(s[i][0] * p0.scale, s[i][1] * p0.scale));
        weights[grp][1] = movmatrix_trans(pack_f16x2(s[i][2] * p1.scale, s[i][3] * p1.scale));
        const uint32_t ones[4] = {kOnes, kOnes, kOnes, kOnes};
        mma_f16(weight_sum[grp], ones, weights[grp]);
      }
      // x[2h]: tokens 2t, 2t+1 (x[2h + 1]: 2t+8, 2t+9) of chunk q = 2 * load + h, channels
      // q * kChunkChannels + kHalfWordCodes * g + (0..kHalfWordCodes-1) per half-word; m-tile
      // kTilesPerChunk * q + k: row g is that channel + pair_first(k), row g+8 + pair_second(k).
#pragma unroll
      for (int load = 0; load < Codes::kLoads; ++load) {
        uint32_t x[4];
        ldmatrix_x4_trans(x,
                          codes + Tile::kValueCodes + Tile::kMTileCodeBytes * i + matrix_row[load]);
        Codes::template for_each_tile<false>(x, [&](int tile, const uint32_t(&va)[4]) {
          const int mt = kTilesPerLoad * load + tile;
          mma_f16(state.acc[mt], va, weights[Tile::group_of_tile(mt)]);
        });
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
  write_warp_state(
      l, a.group, state, merge,
      [&](int i, int half) {
        return i / Codes::kTilesPerChunk * Codes::kChunkChannels + Codes::kHalfWordCodes * l.g +
               extraction(i, half);
      },
      [&](int i, int half, int e) {
        const int grp = Tile::group_of_tile(i);
        return (state.acc[i][2 * half + e] - 64.f * weight_sum[grp][e]) /
                   Codes::extract_factor(extraction(i, half)) +
               zero_acc[grp][e];
      });
}

}  // namespace oscar::cuda::decode
