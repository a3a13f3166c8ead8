#include "kvcache/kv_cache_config.h"

#include <algorithm>

#include <fmt/format.h>

#include "util/error.h"

namespace oscar {

std::string_view to_string(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::f32:
      return "f32";
    case KvDtype::bf16:
      return "bf16";
    case KvDtype::int4:
      return "int4";
    case KvDtype::int2:
      return "int2";
  }
  return "?";
}

std::string_view to_string(KvMethod method) {
  switch (method) {
    case KvMethod::naive:
      return "naive";
    case KvMethod::quarot:
      return "quarot";
    case KvMethod::kivi:
      return "kivi";
    case KvMethod::oscar:
      return "oscar";
  }
  return "?";
}

std::string_view to_string(ParamFormat format) {
  switch (format) {
    case ParamFormat::f16:
      return "f16";
    case ParamFormat::bf16:
      return "bf16";
    case ParamFormat::q8:
      return "q8";
    case ParamFormat::f32:
      return "f32";
  }
  return "?";
}

std::string_view to_string(ClipMode mode) {
  switch (mode) {
    case ClipMode::range_scale:
      return "range-scale";
    case ClipMode::row_quantile:
      return "row-quantile";
  }
  return "?";
}

KvDtype parse_kv_dtype(std::string_view text) {
  for (const KvDtype d : {KvDtype::f32, KvDtype::bf16, KvDtype::int4, KvDtype::int2}) {
    if (text == to_string(d)) return d;
  }
  fail("--kv-cache-dtype: unknown value '{}' (choose bf16, int2, int4 or f32)", text);
}

KvMethod parse_kv_method(std::string_view text) {
  for (const KvMethod m : {KvMethod::naive, KvMethod::quarot, KvMethod::kivi, KvMethod::oscar}) {
    if (text == to_string(m)) return m;
  }
  fail("--kv-method: unknown value '{}' (choose naive, quarot, kivi or oscar)", text);
}

ParamFormat parse_param_format(std::string_view text) {
  if (text == "f16") return ParamFormat::f16;
  if (text == "bf16") return ParamFormat::bf16;
  if (text == "q8") return ParamFormat::q8;
  if (text == "f32") return ParamFormat::f32;
  fail("--kv-scale-format: unknown value '{}' (choose f16, bf16, q8 or f32)", text);
}

ClipMode parse_clip_mode(std::string_view text) {
  for (const ClipMode m : {ClipMode::range_scale, ClipMode::row_quantile}) {
    if (text == to_string(m)) return m;
  }
  fail("--kv-clip-mode: unknown value '{}' (choose range-scale or row-quantile)", text);
}

KvCacheConfig oscar_published_config() {
  KvCacheConfig c;
  c.dtype = KvDtype::int2;
  c.method = KvMethod::oscar;
  c.group_size = 128;
  c.param_format = ParamFormat::f32;
  c.clip_mode = ClipMode::row_quantile;
  c.clip_ratio_k = 0.96f;
  c.clip_ratio_v = 0.92f;
  c.sink_tokens = 64;
  c.recent_tokens = 256;
  return c;
}

void validate(const KvCacheConfig& c, int64_t head_dim) {
  require(c.page_size_tokens >= 1 && c.page_size_tokens <= 4096,
          "--kv-page-size: {} is outside 1..4096", c.page_size_tokens);
  require(c.sink_tokens >= 0, "--kv-sink-tokens: must be >= 0, got {}", c.sink_tokens);
  require(c.recent_tokens >= 0, "--kv-recent-tokens: must be >= 0, got {}", c.recent_tokens);
  require(c.band_tokens >= 0, "--kv-band-tokens: must be >= 0, got {}", c.band_tokens);
  require(c.band_tokens == 0 || (c.dtype == KvDtype::int2 && c.method != KvMethod::kivi),
          "--kv-band-tokens keeps 4-bit copies behind the recent window of a per-token INT2 cache "
          "(--kv-cache-dtype int2, --kv-method naive, quarot or oscar); got {} {}",
          to_string(c.dtype), to_string(c.method));
  if (!c.quantized()) return;
  require(c.group_size == 32 || c.group_size == 64 || c.group_size == 128,
          "--kv-group-size: {} is not supported (choose 32, 64 or 128)", c.group_size);
  require(c.clip_ratio_k > 0 && c.clip_ratio_k <= 1 && c.clip_ratio_v > 0 && c.clip_ratio_v <= 1,
          "--kv-clip-k/--kv-clip-v must lie in (0, 1], got {}/{}", c.clip_ratio_k, c.clip_ratio_v);
  require(!c.clip_search || c.clip_mode == ClipMode::range_scale,
          "--kv-clip-search chooses each group's range scale: it needs --kv-clip-mode range-scale");
  require(!c.lloyd_max || (c.dtype == KvDtype::int2 && c.clip_mode == ClipMode::row_quantile &&
                           !c.keys_per_channel()),
          "--kv-lloyd-max assigns the 4 codes of a clipped row: it needs --kv-cache-dtype int2, "
          "--kv-clip-mode row-quantile and a per-token --kv-method");
  require(!c.lloyd_max || (!c.key_error_feedback && !c.value_error_feedback),
          "--kv-lloyd-max chooses the codes itself: add --no-kv-key-error-feedback and "
          "--no-kv-value-error-feedback");
  require(
      c.clip_mode == ClipMode::range_scale || !c.keys_per_channel(),
      "--kv-clip-mode row-quantile clips per-token rows: --kv-method kivi groups keys per channel");
  require(head_dim % c.group_size == 0,
          "--kv-group-size {} does not divide the model's head_dim {}", c.group_size, head_dim);
  require(!c.keys_per_channel() || c.page_size_tokens % c.group_size == 0,
          "--kv-method kivi groups keys over {} tokens: --kv-page-size ({}) must be a multiple",
          c.group_size, c.page_size_tokens);
  require(c.method != KvMethod::oscar || !c.rotations_path.empty() || c.reads_published_rotations(),
          "--kv-method oscar needs --kv-rotations FILE (made by `oscar calibrate`) or "
          "--kv-rotations-k FILE --kv-rotations-v FILE (published)");
  require(c.published_key_rotations_path.empty() == c.published_value_rotations_path.empty(),
          "--kv-rotations-k and --kv-rotations-v go together (one file for keys, one for values)");
}

std::string describe(const KvCacheConfig& c) {
  if (!c.quantized()) {
    return fmt::format("{} page {}", to_string(c.dtype), c.page_size_tokens);
  }
  const std::string clip =
      c.clip_search ? "clip search"
                    : fmt::format("clip {:.2f}/{:.2f}{}", c.clip_ratio_k, c.clip_ratio_v,
                                  c.clip_mode == ClipMode::row_quantile ? " row-quantile" : "");
  const char* codes = c.lloyd_max ? " lloyd-max" : "";
  const char* feedback = c.key_error_feedback
                             ? (c.value_error_feedback ? " key+value feedback" : " key feedback")
                             : (c.value_error_feedback ? " value feedback" : "");
  const std::string band = c.has_band() ? fmt::format(" band {} int4", c.band_tokens) : "";
  return fmt::format("{} {} g{} {} {}{}{} sink {} recent {}{} page {}", to_string(c.dtype),
                     to_string(c.method), c.group_size, to_string(c.param_format), clip, codes,
                     feedback, c.sink_tokens, c.recent_tokens, band, c.page_size_tokens);
}

KvCacheConfig KvCacheConfig::band_config() const {
  KvCacheConfig band = *this;
  band.dtype = KvDtype::int4;
  band.param_format = ParamFormat::f16;
  band.clip_ratio_k = band.clip_ratio_v = 1.0f;
  band.clip_search = false;
  band.clip_mode = ClipMode::range_scale;
  band.lloyd_max = false;
  band.key_error_feedback = band.value_error_feedback = false;
  band.band_tokens = 0;
  return band;
}

int64_t quantized_end(const KvCacheConfig& c, int64_t num_tokens, int64_t full_precision_until) {
  const int64_t sink = c.sink_tokens;
  if (!c.quantized() || num_tokens <= full_precision_until) return sink;
  const int64_t leaving = num_tokens - c.recent_tokens;  // tokens before the recent window
  if (leaving <= sink) return sink;
  if (!c.keys_per_channel()) return leaving;
  // KIVI groups are aligned to absolute positions (multiples of group_size, so a group never
  // straddles a page); the group that holds the sink boundary quantizes only its non-sink part.
  return std::max(sink, leaving / c.group_size * c.group_size);
}

int64_t band_begin(const KvCacheConfig& c, int64_t num_tokens, int64_t full_precision_until) {
  const int64_t qend = quantized_end(c, num_tokens, full_precision_until);
  return c.has_band() ? std::max(c.sink_tokens, qend - c.band_tokens) : qend;
}

int64_t band_step_begin(const KvCacheConfig& c, int64_t before, int64_t after,
                        int64_t full_precision_until) {
  if (!c.has_band())
    return quantized_end(c, after, full_precision_until);  // nothing read from a band
  const int64_t first_query_tokens = std::min(after, std::max(before, full_precision_until) + 1);
  return band_begin(c, first_query_tokens, full_precision_until);
}

}  // namespace oscar
