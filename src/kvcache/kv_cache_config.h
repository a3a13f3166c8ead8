#pragma once
// What the user chose for the KV cache (the --kv-* flags), and the rule that decides which tokens
// are held quantized.
#include <cstdint>
#include <string>
#include <string_view>

#include "quant/group_codec.h"

namespace oscar {

// f32 exists for the CPU reference only (exact comparisons); bf16 is the full-precision format.
enum class KvDtype : uint8_t { f32, bf16, int4, int2 };
// naive: per-token groups, no rotation; quarot: Hadamard rotation; kivi: keys per channel over
// groups of tokens, values per token; oscar: calibrated rotations from a file.
enum class KvMethod : uint8_t { naive, quarot, kivi, oscar };

// OSCAR's clip ratios as `oscar` applies them by default (cli/model_options.cpp says why the key
// ratio differs from the method document's 0.96).
inline constexpr float kOscarKeyClip = 0.84f;
inline constexpr float kOscarValueClip = 0.92f;
// OSCAR's 4-bit band behind the recent window as `oscar` applies it by default to INT2 caches
// (KvCacheConfig::band_tokens; cli/model_options.cpp says why).
inline constexpr int64_t kOscarBandTokens = 768;

// How clip ratios apply (quant/published_quantizer.h): range_scale scales each group's min and max
// (oscar's --kv-clip-k/v); row_quantile clamps each row at a quantile of its magnitudes, then takes
// plain min/max per group (the published OSCAR code's clipping).
enum class ClipMode : uint8_t { range_scale, row_quantile };

struct KvCacheConfig {
  KvDtype dtype = KvDtype::bf16;
  KvMethod method = KvMethod::naive;
  int group_size = 128;  // channels per group (per-token); tokens per group (KIVI keys)
  ParamFormat param_format = ParamFormat::f16;
  float clip_ratio_k = 1.0f;  // scales each group's min and max before quantizing keys
  float clip_ratio_v = 1.0f;
  bool clip_search = false;  // instead, pick each group's ratio for least squared error
  ClipMode clip_mode = ClipMode::range_scale;
  bool lloyd_max = false;  // INT2 codes by the published Lloyd-Max thresholds (row_quantile only)
  // OSCAR keys and values rounded with error feedback (quant/error_feedback.h,
  // model/value_error_feedback.h).
  bool key_error_feedback = false;
  bool value_error_feedback = false;
  int64_t sink_tokens = 64;     // the first tokens, always full precision
  int64_t recent_tokens = 256;  // the most recent tokens, full precision
  // The tokens just behind the recent window that are also held at 4 bits and read from there
  // (0: none). Each token still gets its 2-bit codes when it leaves the recent window; the 4-bit
  // copy is dropped once the token falls behind the band, so at long context the band costs a
  // fixed number of bytes per sequence.
  int64_t band_tokens = 0;
  int page_size_tokens = 64;
  std::string rotations_path;  // OSCAR rotations file (`oscar calibrate`'s safetensors)
  // Or the published RotationZoo files (torch.save archives), one for keys and one for values.
  std::string published_key_rotations_path;
  std::string published_value_rotations_path;

  bool quantized() const { return dtype == KvDtype::int2 || dtype == KvDtype::int4; }
  int bits() const { return dtype == KvDtype::int2 ? 2 : dtype == KvDtype::int4 ? 4 : 0; }
  bool rotates_keys() const {
    return quantized() && (method == KvMethod::quarot || method == KvMethod::oscar);
  }
  bool keys_per_channel() const { return quantized() && method == KvMethod::kivi; }
  ClipPolicy key_clip() const { return {clip_ratio_k, clip_search}; }
  ClipPolicy value_clip() const { return {clip_ratio_v, clip_search}; }
  // The storage dtype of full-precision pages (sink, recent window, and bf16 caches).
  KvDtype full_dtype() const { return dtype == KvDtype::f32 ? KvDtype::f32 : KvDtype::bf16; }
  bool has_band() const { return band_tokens > 0 && quantized(); }
  bool reads_published_rotations() const { return !published_key_rotations_path.empty(); }
  // The format of the band's pages: INT4 over the same groups and rotation, f16 scale and zero,
  // no clipping, rounded to nearest (4 bits leave little to gain from either).
  KvCacheConfig band_config() const;
};

std::string_view to_string(KvDtype dtype);
std::string_view to_string(KvMethod method);
std::string_view to_string(ParamFormat format);
std::string_view to_string(ClipMode mode);
KvDtype parse_kv_dtype(std::string_view text);  // throws Error listing the choices
KvMethod parse_kv_method(std::string_view text);
ParamFormat parse_param_format(std::string_view text);
ClipMode parse_clip_mode(std::string_view text);

// The published OSCAR serving configuration (`--kv-preset oscar-published`): INT2, groups of 128,
// row-quantile clipping at 0.96 / 0.92, f32 scale and zero, sink 64, recent 256, no band, rounded
// to nearest. The rotations are the caller's to set.
KvCacheConfig oscar_published_config();

// Checks the combination against a model's head_dim; throws Error naming the flag at fault.
void validate(const KvCacheConfig& config, int64_t head_dim);

// One line describing the configuration, e.g. "int2 oscar g128 f16 clip 0.96/0.92 sink 64 recent
// 256".
std::string describe(const KvCacheConfig& config);

// The decode-semantics rule, used by every writer and reader: when the query at position t runs,
// the sequence holds t + 1 tokens, and token j is read quantized iff sink <= j < quantized_end(t +
// 1) (sink = config.sink_tokens; quantized_end() >= sink, equal when nothing is quantized).
// Per-token methods quantize a token as soon as it leaves the recent window; KIVI quantizes keys
// per channel over groups of `group_size` tokens aligned to multiples of group_size, so its
// boundary moves a whole group at a time.
// `full_precision_until`: while the sequence holds no more than this many tokens nothing is
// quantized (a prompt prefilled in full precision, then quantized before decoding).
int64_t quantized_end(const KvCacheConfig& config, int64_t num_tokens,
                      int64_t full_precision_until = 0);
// Where the band starts: of the quantized tokens [sink, quantized_end), those in
// [band_begin, quantized_end) are read from their 4-bit copy (band_begin == quantized_end when the
// cache has no band).
int64_t band_begin(const KvCacheConfig& config, int64_t num_tokens,
                   int64_t full_precision_until = 0);
// The first position that some query of a step growing a sequence from `before` to `after` tokens
// reads from the band: band pages must cover [band_step_begin, quantized_end(after)) during the
// step. A step that crosses `full_precision_until` starts with queries that read nothing quantized.
int64_t band_step_begin(const KvCacheConfig& config, int64_t before, int64_t after,
                        int64_t full_precision_until = 0);

}  // namespace oscar
