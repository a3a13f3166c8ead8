#pragma once
// Asymmetric uniform quantization of one group of values to 2^bits levels (INT2: 4, INT4: 16),
// the codec of every quantized KV format (OSCAR method spec, "Storage"):
//   clip:  lo = c * min(x), hi = c * max(x)        (c = clip ratio, 1 = no clipping)
//   scale: s = (hi - lo) / (2^bits - 1), zero z = lo, both rounded to their storage format
//   code:  q = clamp(rint((x - z) / s), 0, 2^bits - 1);   x' = q * s + z
// With clip search, c is chosen per group among clip_candidate(i) to minimise the group's squared
// reconstruction error (measured with the stored, rounded parameters).
// Codes are packed little-end first: element i of a group sits in byte i * bits / 8 at bit
// (i * bits) % 8.
#include <array>
#include <cstdint>
#include <span>

namespace oscar {

// How the per-group scale and zero are stored:
//   f16, bf16: two 16-bit floats (4 bytes a group);
//   q8: one byte each (2 bytes a group): scale = 2^(e/12 - 12) for e in 0..255 (a 5.9% grid over
//       2^-12..2^9.25), zero = z * scale / 16 for a signed byte z;
//   f32: two 32-bit floats (8 bytes a group), the published OSCAR serving configuration's.
enum class ParamFormat : uint8_t { f16, bf16, q8, f32 };

struct GroupParams {
  float scale = 0;
  float zero = 0;
};

struct ClipPolicy {
  float ratio = 1.0f;   // used as is unless `search`
  bool search = false;  // pick the best clip_candidate(i) per group
};

// Clip search candidates: c = 1, 0.96, ..., 0.72. The squared-error optimum of a 4-level grid
// over a Gaussian group sits near c = 0.55, but letting the search go that low made testbed
// perplexity worse (oscar g128: 15.17 against 14.85 with the floor at 0.72): the extremes it
// clips are the outliers attention depends on, so group MSE is only trusted near the range ends.
inline constexpr int kClipCandidateCount = 8;
// A correctly rounded division, so host and device (where a - b * c may contract to an FMA) get
// the same floats, equal to the literals 1.0f, 0.96f, ...
constexpr float clip_candidate(int i) {
  return float(25 - i) / 25.0f;
}

constexpr int param_bytes_per_group(ParamFormat format) {
  return format == ParamFormat::q8 ? 2 : format == ParamFormat::f32 ? 8 : 4;
}
constexpr int packed_bytes(int count, int bits) {
  return count * bits / 8;
}

// Storable parameters whose grid covers [lo, hi].
GroupParams params_for_range(float lo, float hi, int bits, ParamFormat format);

// Chooses scale and zero for a group (already representable in `format`).
GroupParams choose_group_params(std::span<const float> values, int bits, ClipPolicy clip,
                                ParamFormat format);

// The parameters of each group of `group_size` consecutive values of a row, into `params`
// (row.size() / group_size of them).
void choose_row_params(std::span<const float> row, int group_size, int bits, ClipPolicy clip,
                       ParamFormat format, std::span<GroupParams> params);

// The code of one value: its nearest grid point of `params`, clamped to [0, 2^bits - 1].
int quantize_code(float value, GroupParams params, int bits);

// Quantizes `values` with `params` into packed codes (packed_bytes(values.size(), bits) bytes).
void quantize_group(std::span<const float> values, GroupParams params, int bits, uint8_t* codes);

// Codes of `count` elements starting at element `first` of a packed run, dequantized.
void dequantize_group(const uint8_t* codes, int first, int count, GroupParams params, int bits,
                      float* out);

uint8_t code_at(const uint8_t* codes, int index, int bits);

void store_params(GroupParams params, ParamFormat format, uint8_t* out);
GroupParams load_params(const uint8_t* in, ParamFormat format);

// The q8 scale of exponent code e in [0, kQ8ScaleCount) (the table kernels load).
inline constexpr int kQ8ScaleCount = 256;
float q8_scale(int exponent_code);

}  // namespace oscar
