#pragma once
// Asymmetric uniform quantization of one group of values to 2^bits levels (INT2: 4, INT4: 16),
// the codec of every quantized KV format (OSCAR method spec, "Storage"):
//   clip:  lo = c * min(x), hi = c * max(x)        (c = clip ratio, 1 = no clipping)
//   scale: s = (hi - lo) / (2^bits - 1), zero z = lo, both rounded to their storage format
//   code:  q = clamp(round((x - z) / s), 0, 2^bits - 1);   x' = q * s + z
// Codes are packed little-end first: element i of a group sits in byte i * bits / 8 at bit
// (i * bits) % 8.
#include <cstdint>
#include <span>

namespace oscar {

// How the per-group scale and zero are stored: two fp16 or two bf16 values (4 bytes a group).
enum class ParamFormat : uint8_t { f16, bf16 };

struct GroupParams {
  float scale = 0;
  float zero = 0;
};

constexpr int param_bytes_per_group(ParamFormat) { return 4; }
constexpr int packed_bytes(int count, int bits) { return count * bits / 8; }

// Chooses scale and zero for a group (already rounded to `format`).
GroupParams choose_group_params(std::span<const float> values, int bits, float clip_ratio,
                                ParamFormat format);

// Quantizes `values` with `params` into packed codes (packed_bytes(values.size(), bits) bytes).
void quantize_group(std::span<const float> values, GroupParams params, int bits, uint8_t* codes);

// Codes of `count` elements starting at element `first` of a packed run, dequantized.
void dequantize_group(const uint8_t* codes, int first, int count, GroupParams params, int bits,
                      float* out);

uint8_t code_at(const uint8_t* codes, int index, int bits);

void store_params(GroupParams params, ParamFormat format, uint8_t* out);
GroupParams load_params(const uint8_t* in, ParamFormat format);

}  // namespace oscar
