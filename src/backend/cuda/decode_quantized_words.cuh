#pragma once
// The decode attention kernel's path over quantized pages read with per-lane word loads: INT2 and
// INT4 in groups of 32 channels (and their band), the formats the super-tile path does not take.
#include "backend/cuda/decode_attention_warp.cuh"
#include "backend/cuda/device_codec.cuh"

namespace oscar::cuda::decode {

constexpr uint32_t kMagic = 0x64006400u;  // f16x2 (1024, 1024)

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

// Quantized pages read with word loads; `Band`: the band's pages (AttentionArgs::band_layout and
// band_pages, PageIds::band) instead of the cache's quantized ones.
template <int Bits, int Group, ParamFormat Format, bool Band = false>
__device__ void process_quantized_item(const ItemContext& c, WarpState& state, unsigned char* pool,
                                       float* merge) {
  using Tile = QuantizedTile<Bits, Group>;
  constexpr int kGroups = Tile::kGroups;
  constexpr int kCodesPerWord = 32 / Bits;
  constexpr int kHalfWord = kCodesPerWord / 2;  // codes 16 bits apart: k and k + kHalfWord
  constexpr int kLanesPerWord = kHalfWord / 2;  // lanes sharing one word of a k-tile
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
  QueryValues query(c, l.g, loads_query_first(tiles), [&](int i) {
    return first_channel(i / 4) + (i & 1) * kHalfWord + (i >> 1 & 1);
  });
  const int page_size = int(layout.page_size_tokens);
  TilePageIds page_ids(tiles.count, [&](int k) {
    const PageIds ids =
        a.page_table[c.item.page_table + page_position(tiles.position(k), page_size).page];
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
    for (int e = 0; e < 2; ++e)
      q_sum[grp][e] = __shfl_sync(0xffffffffu, q_sum_part[grp], 4 * (2 * l.t + e));
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
    const uint32_t* row_g =
        reinterpret_cast<const uint32_t*>(buffer + Tile::kKeyCodes + l.g * Tile::kCodeStride);
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
      const DeviceParams p0 =
          load_params<Format>(key_params + (l.g * kGroups + grp) * param_bytes, c.q8_scales);
      const DeviceParams p1 =
          load_params<Format>(key_params + ((l.g + 8) * kGroups + grp) * param_bytes, c.q8_scales);
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
      const DeviceParams p0 =
          load_params<Format>(value_params + (l.g * kGroups + grp) * param_bytes, c.q8_scales);
      const DeviceParams p1 = load_params<Format>(
          value_params + ((l.g + 8) * kGroups + grp) * param_bytes, c.q8_scales);
      zero_acc[grp][0] = zero_acc[grp][0] * correction[0] + s[0] * p0.zero + s[2] * p1.zero;
      zero_acc[grp][1] = zero_acc[grp][1] * correction[1] + s[1] * p0.zero + s[3] * p1.zero;
      weights[grp][0] = movmatrix_trans(pack_f16x2(s[0] * p0.scale, s[1] * p0.scale));
      weights[grp][1] = movmatrix_trans(pack_f16x2(s[2] * p1.scale, s[3] * p1.scale));
    }
    // Output: value codes of tokens 2t, 2t+1 (and 2t+8, 2t+9), paired by one byte permute.
    const unsigned char* value_codes = buffer + Tile::kValueCodes;
    const uint32_t* v0 =
        reinterpret_cast<const uint32_t*>(value_codes + (2 * l.t) * Tile::kCodeStride);
    const uint32_t* v1 =
        reinterpret_cast<const uint32_t*>(value_codes + (2 * l.t + 1) * Tile::kCodeStride);
    const uint32_t* v8 =
        reinterpret_cast<const uint32_t*>(value_codes + (2 * l.t + 8) * Tile::kCodeStride);
    const uint32_t* v9 =
        reinterpret_cast<const uint32_t*>(value_codes + (2 * l.t + 9) * Tile::kCodeStride);
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
        return state.acc[i][2 * half + e] * (half ? unscale_high : unscale_low) +
               zero_acc[16 * i / Group][e];
      });
}

}  // namespace oscar::cuda::decode
