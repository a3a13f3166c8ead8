#pragma once
// The one description of where KV bytes live inside a page. A page holds `page_size_tokens`
// consecutive token positions of one layer, for every KV head. The CPU reference, the CUDA
// kernels, the tests and the byte accounting all index pages through this struct.
//
// Full-precision page (bf16, or f32 on the CPU reference):
//   keys   [kv_head][slot][head_dim]   then   values [kv_head][slot][head_dim]
// Quantized page (INT2/INT4), four sections in this order:
//   key codes    [kv_head][slot][head_dim * bits / 8]
//   key params   per-token:   [kv_head][slot][head_dim / group_size]  x (scale, zero)
//                per-channel: [kv_head][slot / group_size][head_dim]  x (scale, zero)   (KIVI)
//   value codes  [kv_head][slot][head_dim * bits / 8]
//   value params [kv_head][slot][head_dim / group_size]  x (scale, zero)
#include <cstdint>

#include "kvcache/kv_cache_config.h"
#include "kvcache/page_pool.h"
#include "quant/group_codec.h"

namespace oscar {

struct PageLayout {
  int64_t page_size_tokens = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;

  int64_t element_bytes = 2;  // of full-precision pages
  int64_t full_page_bytes = 0;

  int bits = 0;  // 0: no quantized pages
  int64_t group_size = 0;
  bool keys_per_channel = false;
  ParamFormat param_format = ParamFormat::f16;
  int64_t param_bytes = 4;         // one (scale, zero) pair
  int64_t code_bytes_per_row = 0;  // one token of one head
  int64_t key_param_pairs_per_head = 0;
  int64_t value_param_pairs_per_head = 0;
  int64_t key_codes_offset = 0;
  int64_t key_params_offset = 0;
  int64_t value_codes_offset = 0;
  int64_t value_params_offset = 0;
  int64_t quantized_page_bytes = 0;
  int64_t band_page_bytes = 0;  // a page of the 4-bit band (band_layout()); 0: no band

  // The offsets are constexpr so that CUDA kernels (built with --expt-relaxed-constexpr) call these
  // same functions on a PageLayout passed by value: one description of the bytes, no device copy.
  // Full-precision page.
  constexpr int64_t full_key_offset(int64_t kv_head, int64_t slot) const {
    return (kv_head * page_size_tokens + slot) * head_dim * element_bytes;
  }
  constexpr int64_t full_value_offset(int64_t kv_head, int64_t slot) const {
    return full_page_bytes / 2 + full_key_offset(kv_head, slot);
  }
  // Quantized page.
  constexpr int64_t key_codes(int64_t kv_head, int64_t slot) const {
    return key_codes_offset + (kv_head * page_size_tokens + slot) * code_bytes_per_row;
  }
  constexpr int64_t value_codes(int64_t kv_head, int64_t slot) const {
    return value_codes_offset + (kv_head * page_size_tokens + slot) * code_bytes_per_row;
  }
  // Per-token key params: `group` indexes channel groups. Per-channel (KIVI): `group` is the
  // channel.
  constexpr int64_t key_params(int64_t kv_head, int64_t slot, int64_t group) const {
    const int64_t row =
        keys_per_channel ? (slot / group_size) * head_dim : slot * (head_dim / group_size);
    return key_params_offset + (kv_head * key_param_pairs_per_head + row + group) * param_bytes;
  }
  constexpr int64_t value_params(int64_t kv_head, int64_t slot, int64_t group) const {
    return value_params_offset +
           (kv_head * value_param_pairs_per_head + slot * (head_dim / group_size) + group) *
               param_bytes;
  }
};

PageLayout make_page_layout(const KvCacheConfig& config, int64_t num_kv_heads, int64_t head_dim);
// The layout of the band's pages: their quantized section is laid out as an INT4 cache's
// (KvCacheConfig::band_config()).
PageLayout make_band_layout(const KvCacheConfig& config, int64_t num_kv_heads, int64_t head_dim);

inline int64_t bytes_per_layer(const KvPageCounts& pages, const PageLayout& layout) {
  return pages.full * layout.full_page_bytes + pages.quantized * layout.quantized_page_bytes +
         pages.band * layout.band_page_bytes;
}

// How many pages of each kind one sequence of `num_tokens` tokens holds under the decode rule
// (kv_cache_config.h).
KvPageCounts footprint_for_tokens(const KvCacheConfig& config, int64_t num_tokens);

// Pool sizes for `num_sequences` sequences of up to `tokens_per_sequence` tokens, whose steps
// compute at most `step_tokens` new tokens between them (the scheduler's step budget; for one
// sequence, its prefill chunk). The step's tokens are counted once, not once per sequence: with
// 8192-token chunks and 64 sequences, only the budget's chunks are in flight, not 64.
KvPageCounts capacity_for_sequences(const KvCacheConfig& config, int64_t tokens_per_sequence,
                                    int64_t num_sequences, int64_t step_tokens);

// Pool sizes that fill `bytes` over `num_layers` layers: enough full-precision pages for
// `num_sequences` sequences' sink and recent window and a step of `step_tokens` new tokens among
// them, but at most half the bytes, the rest quantized (all full-precision when the cache is not
// quantized). The cap keeps a small pool from having no quantized page at all: its sequences
// could never leave the recent window. With a band, band pages for each sequence's band and the
// step's tokens, at most a quarter of the bytes.
KvPageCounts capacity_for_bytes(const KvCacheConfig& config, const PageLayout& layout,
                                int64_t num_layers, int64_t bytes, int64_t num_sequences,
                                int64_t step_tokens);

// Bits per stored K/V element: bytes actually allocated * 8 / (tokens * kv_heads * D * 2), per
// layer.
double bits_per_element(const PageLayout& layout, const KvPageCounts& pages, int64_t num_tokens);

}  // namespace oscar
