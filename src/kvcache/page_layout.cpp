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
  l.key_param_pairs_per_head = l.keys_per_channel ? (l.page_size_tokens / l.group_size) * head_dim
                                                  : l.value_param_pairs_per_head;
  const int64_t codes_bytes = num_kv_heads * l.page_size_tokens * l.code_bytes_per_row;
  l.key_codes_offset = 0;
  l.key_params_offset = codes_bytes;
  l.value_codes_offset =
      l.key_params_offset + num_kv_heads * l.key_param_pairs_per_head * l.param_bytes;
  l.value_params_offset = l.value_codes_offset + codes_bytes;
  l.quantized_page_bytes =
      l.value_params_offset + num_kv_heads * l.value_param_pairs_per_head * l.param_bytes;
  // Keep every page 16-byte aligned so kernels can use vector loads.
  l.quantized_page_bytes = (l.quantized_page_bytes + 15) / 16 * 16;
  if (config.has_band())
    l.band_page_bytes = make_band_layout(config, num_kv_heads, head_dim).quantized_page_bytes;
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

int64_t pages_holding(int64_t tokens, int64_t page) {
  return (tokens + page - 1) / page;
}

// Pages that `num_sequences` runs of `own_tokens` tokens each span when the step's `step_tokens`
// new tokens extend them, split among the sequences in any way (c_s each): the sum of
// ceil((own + c_s) / P) is at most (n - 1) (ceil(own / P) + 1) + ceil((own + step) / P), as
// ceil(a) + ceil(b) <= ceil(a + b) + 1. One sequence: ceil((own + step) / P).
int64_t pages_of_runs(int64_t own_tokens, int64_t step_tokens, int64_t num_sequences,
                      int64_t page) {
  if (num_sequences <= 0) return 0;
  return (num_sequences - 1) * (pages_holding(own_tokens, page) + 1) +
         pages_holding(own_tokens + step_tokens, page);
}

// Full-precision pages the sequences hold at most: each its sink, recent window (and KIVI's
// key group) and the step's new tokens, and the pages that their ends straddle.
int64_t full_pages(const KvCacheConfig& c, int64_t num_sequences, int64_t step_tokens) {
  const int64_t page = c.page_size_tokens;
  const int64_t window = c.recent_tokens + (c.keys_per_channel() ? c.group_size : 0);
  return num_sequences * (pages_holding(c.sink_tokens, page) + 2) +
         pages_of_runs(window, step_tokens, num_sequences, page);
}

// Band pages the sequences hold at most: each its band and the step's new tokens passing through
// it, and the pages their ends straddle.
int64_t band_pages(const KvCacheConfig& c, int64_t num_sequences, int64_t step_tokens) {
  return num_sequences * 2 +
         pages_of_runs(c.band_tokens, step_tokens, num_sequences, c.page_size_tokens);
}

}  // namespace

KvPageCounts capacity_for_sequences(const KvCacheConfig& config, int64_t tokens_per_sequence,
                                    int64_t num_sequences, int64_t step_tokens) {
  const KvPageCounts one = footprint_for_tokens(config, tokens_per_sequence);
  KvPageCounts total;
  total.full = num_sequences * (one.full + 1) +
               pages_of_runs(0, step_tokens, num_sequences, config.page_size_tokens);
  total.quantized = num_sequences * one.quantized;
  // A step reads its first query's band and writes the chunk's tokens into it as they leave the
  // window (band_step_begin).
  if (config.has_band()) total.band = band_pages(config, num_sequences, step_tokens);
  return total;
}

KvPageCounts capacity_for_bytes(const KvCacheConfig& config, const PageLayout& layout,
                                int64_t num_layers, int64_t bytes, int64_t num_sequences,
                                int64_t step_tokens) {
  const int64_t per_layer = bytes / num_layers;
  KvPageCounts pages;
  if (!config.quantized()) {
    pages.full = per_layer / layout.full_page_bytes;
    return pages;
  }
  pages.full = std::min(per_layer / 2 / layout.full_page_bytes,
                        full_pages(config, num_sequences, step_tokens));
  if (config.has_band()) {
    pages.band = std::min(per_layer / 4 / layout.band_page_bytes,
                          band_pages(config, num_sequences, step_tokens));
  }
  pages.quantized =
      (per_layer - pages.full * layout.full_page_bytes - pages.band * layout.band_page_bytes) /
      layout.quantized_page_bytes;
  return pages;
}

double bits_per_element(const PageLayout& layout, const KvPageCounts& pages, int64_t num_tokens) {
  if (num_tokens <= 0) return 0;
  const double elements = double(num_tokens) * double(layout.num_kv_heads * layout.head_dim * 2);
  return double(bytes_per_layer(pages, layout)) * 8.0 / elements;
}

}  // namespace oscar
