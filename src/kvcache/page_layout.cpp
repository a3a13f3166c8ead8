#include "kvcache/page_layout.h"

#include <algorithm>

#include "util/error.h"

namespace oscar {
namespace {

int64_t pages_covering(int64_t begin, int64_t end, int64_t page_size) {
  if (end <= begin) return 0;
  return (end - 1) / page_size - begin / page_size + 1;
}

}  // namespace

PageLayout make_page_layout(const KvCacheConfig& config, int64_t num_kv_heads, int64_t head_dim) {
  validate(config, head_dim);
  PageLayout l;
  l.page_size_tokens = config.page_size_tokens;
  l.num_kv_heads = num_kv_heads;
  l.head_dim = head_dim;
  l.element_bytes = config.full_dtype() == KvDtype::f32 ? 4 : 2;
  l.full_page_bytes = 2 * num_kv_heads * l.page_size_tokens * head_dim * l.element_bytes;
  if (!config.quantized()) return l;

  l.bits = config.bits();
  l.group_size = config.group_size;
  l.keys_per_channel = config.keys_per_channel();
  l.param_format = config.param_format;
  l.param_bytes = param_bytes_per_group(config.param_format);
  l.code_bytes_per_row = head_dim * l.bits / 8;
  const int64_t channel_groups = head_dim / l.group_size;
  l.value_param_pairs_per_head = l.page_size_tokens * channel_groups;
  l.key_param_pairs_per_head = l.keys_per_channel
                                   ? (l.page_size_tokens / l.group_size) * head_dim
                                   : l.value_param_pairs_per_head;
  const int64_t codes_bytes = num_kv_heads * l.page_size_tokens * l.code_bytes_per_row;
  l.key_codes_offset = 0;
  l.key_params_offset = codes_bytes;
  l.value_codes_offset = l.key_params_offset + num_kv_heads * l.key_param_pairs_per_head * l.param_bytes;
  l.value_params_offset = l.value_codes_offset + codes_bytes;
  l.quantized_page_bytes =
      l.value_params_offset + num_kv_heads * l.value_param_pairs_per_head * l.param_bytes;
  // Keep every page 16-byte aligned so kernels can use vector loads.
  l.quantized_page_bytes = (l.quantized_page_bytes + 15) / 16 * 16;
  if (config.has_band()) l.band_page_bytes = make_band_layout(config, num_kv_heads, head_dim).quantized_page_bytes;
  return l;
}

PageLayout make_band_layout(const KvCacheConfig& config, int64_t num_kv_heads, int64_t head_dim) {
  require(config.has_band(), "make_band_layout: the cache has no band ({})", describe(config));
  return make_page_layout(config.band_config(), num_kv_heads, head_dim);
}

KvPageCounts footprint_for_tokens(const KvCacheConfig& config, int64_t num_tokens) {
  const int64_t page = config.page_size_tokens;
  const int64_t sink = std::min(config.sink_tokens, num_tokens);
  const int64_t qend = quantized_end(config, num_tokens);
  KvPageCounts f;
  // Full pages: those holding a sink token or a token at or after the quantized region's end.
  const int64_t sink_pages = pages_covering(0, sink, page);
  const int64_t tail_pages = pages_covering(qend, num_tokens, page);
  const int64_t shared = (sink > 0 && qend < num_tokens && (qend / page) <= (sink - 1) / page)
                             ? (sink - 1) / page - qend / page + 1
                             : 0;
  f.full = sink_pages + tail_pages - shared;
  f.quantized = pages_covering(config.sink_tokens, qend, page);
  f.band = pages_covering(band_begin(config, num_tokens), qend, page);
  return f;
}

namespace {

// Full-precision pages one sequence holds at most: sink, recent window, a chunk, and the pages
// that the window and chunk boundaries straddle.
int64_t full_pages_per_sequence(const KvCacheConfig& c, int64_t chunk_tokens) {
  const int64_t page = c.page_size_tokens;
  const int64_t tail = c.recent_tokens + chunk_tokens + (c.keys_per_channel() ? c.group_size : 0);
  return (c.sink_tokens + page - 1) / page + (tail + page - 1) / page + 2;
}

// Band pages one sequence holds at most: the band and a chunk, and the pages their ends straddle.
int64_t band_pages_per_sequence(const KvCacheConfig& c, int64_t chunk_tokens) {
  const int64_t page = c.page_size_tokens;
  return (c.band_tokens + chunk_tokens + page - 1) / page + 2;
}

}  // namespace

KvPageCounts capacity_for_sequences(const KvCacheConfig& config, int64_t tokens_per_sequence,
                                    int64_t num_sequences, int64_t chunk_tokens) {
  const KvPageCounts one = footprint_for_tokens(config, tokens_per_sequence);
  const int64_t page = config.page_size_tokens;
  KvPageCounts total;
  total.full = num_sequences * (one.full + (chunk_tokens + page - 1) / page + 1);
  total.quantized = num_sequences * one.quantized;
  // A step reads its first query's band and writes the chunk's tokens into it as they leave the
  // window (band_step_begin).
  if (config.has_band()) total.band = num_sequences * band_pages_per_sequence(config, chunk_tokens);
  return total;
}

KvPageCounts capacity_for_bytes(const KvCacheConfig& config, const PageLayout& layout,
                                int64_t num_layers, int64_t bytes, int64_t num_sequences,
                                int64_t chunk_tokens) {
  const int64_t per_layer = bytes / num_layers;
  KvPageCounts pages;
  if (!config.quantized()) {
    pages.full = per_layer / layout.full_page_bytes;
    return pages;
  }
  pages.full = std::min(per_layer / 2 / layout.full_page_bytes,
                        num_sequences * full_pages_per_sequence(config, chunk_tokens));
  if (config.has_band()) {
    pages.band = std::min(per_layer / 4 / layout.band_page_bytes,
                          num_sequences * band_pages_per_sequence(config, chunk_tokens));
  }
  pages.quantized = (per_layer - pages.full * layout.full_page_bytes - pages.band * layout.band_page_bytes) /
                    layout.quantized_page_bytes;
  return pages;
}

double bits_per_element(const PageLayout& layout, const KvPageCounts& pages, int64_t num_tokens) {
  if (num_tokens <= 0) return 0;
  const double elements = double(num_tokens) * double(layout.num_kv_heads * layout.head_dim * 2);
  return double(bytes_per_layer(pages, layout)) * 8.0 / elements;
}

}  // namespace oscar
