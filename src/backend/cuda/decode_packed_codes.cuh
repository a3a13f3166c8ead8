#pragma once
// How the super-tile path of the decode attention kernel (decode_packed_pages.cuh) finds INT2 and
// INT4 codes and their group parameters: the codes' places in a row and in ldmatrix's registers,
// their unpacking into f16, a pipeline stage's layout, and the q8 parameters decoded once a stage.
#include "backend/cuda/decode_attention_warp.cuh"
#include "backend/cuda/device_codec.cuh"

namespace oscar::cuda::decode {

// INT2 and INT4 pages in groups of 64 or 128 channels (OSCAR's cache and its band).
//
// A warp takes super-tiles (64 tokens of INT2 or 32 of INT4, four or two 16-token m-tiles: one
// pipeline stage is 8-9 KB either way, three fit its pool) round-robin, so the softmax, the
// pipeline and the page lookups are paid once per super-tile and the m-tiles' mma chains overlap.
// Codes come from shared memory through ldmatrix (keys) and ldmatrix.trans (values) in 16-byte
// chunks of a token's codes and are unpacked without a subtraction: the codes of a half-word that
// lie in bits 0-9 (INT2: 0-4, INT4: 0-1) are or-ed in place into the f16 64.0, which reads 64 +
// c/16, 64 + c/4, 64 + c, 64 + 4c or 64 + 16c exactly, and the others the same after one shift (the
// 64.0's exponent occupies bits 10-14). The query is divided by that factor, and the constant 64 is
// taken out per group: 64 * (sum of the f16 query), computed once per item, is where the scores'
// accumulation starts; 64 * (sum of the f16 weights) for the outputs, by one more mma against ones
// per m-tile. The constant is at most 1024x a code step, so the f32 accumulation keeps ~14 bits of
// the codes' contribution, finer than the f16 query (11 bits) and the f16 weights it multiplies.
// INT2 is the cache's format; INT4 is an INT4 cache's and the band's (whose items took a slower
// word-load path before).
constexpr uint32_t kMagic64 = 0x54005400u;  // f16x2 (64, 64)
constexpr uint32_t kOnes = 0x3c003c00u;     // f16x2 (1, 1)

// How codes of `Bits` bits sit in a token's row and in the registers ldmatrix fills.
template <int Bits>
struct PackedCodes {
  static_assert(Bits == 2 || Bits == 4, "packed codes are INT2 or INT4");
  static constexpr int kChunks = Bits;            // 16-byte chunks of a token's 128 channels
  static constexpr int kRowBytes = 16 * kChunks;  // one token's codes
  static constexpr int kChunkChannels = kHeadDim / kChunks;  // channels of a chunk
  static constexpr int kLoads = kChunks / 2;  // ldmatrix x4 loads per m-tile (two chunks each)
  static constexpr int kHalfWordCodes = 16 / Bits;  // a register's extractions
  static constexpr int kTilesPerChunk =
      kHalfWordCodes / 2;  // k-tiles (keys) or m-tiles (values) of a chunk
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
  static __device__ __forceinline__ int extract_bit(int e) {
    return e < kInPlace ? Bits * e : Bits * e - kShift;
  }
  static __device__ __forceinline__ float extract_factor(int e) {
    return float(1 << extract_bit(e)) / 16.f;
  }
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
  static __device__ __forceinline__ int pair_first(int k) {
    return Bits == 4 ? 2 * k : (k < 3 ? k : 6);
  }
  static __device__ __forceinline__ int pair_second(int k) {
    return Bits == 4 ? 2 * k + 1 : (k < 3 ? k + 3 : 7);
  }

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
            extract_codes(first, e1),
            extract_codes(RowsAreTokens ? second : first, RowsAreTokens ? e1 : e2),
            extract_codes(RowsAreTokens ? first : second, RowsAreTokens ? e2 : e1),
            extract_codes(second, e2)};
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
  static_assert(kMTileParamBytes % 16 == 0 && kMTileParamBytes <= 16 * 16 && kStages >= 3,
                "packed tile");
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
        pairs[k] = *reinterpret_cast<const uint16_t*>(buffer + Tile::kKeyParams +
                                                      (lane + 32 * k) * Tile::kParamBytes);
      }
      DeviceParams p[kPerLane];
#pragma unroll
      for (int k = 0; k < kPerLane; ++k) p[k] = decode_q8_params(pairs[k], q8_scales);
#pragma unroll
      for (int k = 0; k < kPerLane; ++k)
        decoded[lane + 32 * k] = make_float2(p[k].scale, p[k].zero);
      __syncwarp();
    }
  }
  __device__ __forceinline__ DeviceParams get(const unsigned char* buffer, bool value, int i,
                                              int row, int grp) const {
    const int index = (value ? Tile::kSuperTokens * Tile::kGroups : 0) +
                      (kTileTokens * i + row) * Tile::kGroups + grp;
    if constexpr (Tile::kDecodesParams) {
      const float2 pair = decoded[index];
      return {pair.x, pair.y};
    }
    return load_params<Format>(buffer + Tile::kKeyParams + index * Tile::kParamBytes, q8_scales);
  }
};

}  // namespace oscar::cuda::decode
