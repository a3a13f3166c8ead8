#pragma once
// The bytes of the KV cache in host memory: per layer, one arena of full-precision pages, one of
// quantized pages and, with a band, one of 4-bit band pages, indexed through PageLayout. This is
// the reference for the CUDA write path (cuda/kv_write.cu) and its readers.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "kvcache/page_layout.h"
#include "kvcache/sequence_pages.h"
#include "util/zeroed_memory.h"

namespace oscar {

class CpuKvStore {
 public:
  CpuKvStore(const KvCacheConfig& config, const PageLayout& layout, int64_t num_layers,
             KvPageCounts capacity);

  // One token's keys and values for every KV head ([kv_heads][head_dim] each), into its slot.
  void write_full(int64_t layer, const std::vector<LogicalPage>& pages, int64_t position,
                  const float* keys, const float* values);

  // Quantizes positions [begin, end) (all KV heads) from their full pages into quantized pages,
  // and those from `band_from` on into band pages too. For KIVI the range is a union of whole
  // position-aligned key groups.
  void quantize(int64_t layer, const std::vector<LogicalPage>& pages, int64_t begin, int64_t end,
                int64_t band_from);

  // Rows [begin, end) of one KV head, as float, into keys_out / values_out ([end-begin][head_dim]).
  void read_full(int64_t layer, const std::vector<LogicalPage>& pages, int64_t kv_head,
                 int64_t begin, int64_t end, float* keys_out, float* values_out) const;
  void read_quantized(int64_t layer, const std::vector<LogicalPage>& pages, int64_t kv_head,
                      int64_t begin, int64_t end, float* keys_out, float* values_out) const;
  void read_band(int64_t layer, const std::vector<LogicalPage>& pages, int64_t kv_head,
                 int64_t begin, int64_t end, float* keys_out, float* values_out) const;

  size_t bytes_allocated() const;

  // Keys and values rounded with error feedback (quant/error_feedback.h): the factor of each
  // (layer, KV head), [layers][kv_heads][head_dim][head_dim] (key_feedback_factors,
  // value_feedback_factors); empty: nearest rounding.
  void set_feedback(std::vector<float> key_factors, std::vector<float> value_factors);

 private:
  enum class PageKind { full, quantized, band };
  std::byte* page(int64_t layer, const std::vector<LogicalPage>& pages, int64_t position,
                  PageKind kind);
  const std::byte* page(int64_t layer, const std::vector<LogicalPage>& pages, int64_t position,
                        PageKind kind) const;
  void load_full_row(const std::byte* source, float* out) const;
  // One row into per-token groups of a quantized page, or of a band page in the band's format.
  void quantize_token_groups(std::byte* page, bool band, int64_t layer, int64_t kv_head,
                             int64_t slot, const float* row, bool is_key);
  void quantize_key_channels(int64_t layer, const std::vector<LogicalPage>& pages, int64_t begin,
                             int64_t end);
  void read_codes(const PageLayout& layout, PageKind kind, int64_t layer,
                  const std::vector<LogicalPage>& pages, int64_t kv_head, int64_t begin,
                  int64_t end, float* keys_out, float* values_out) const;

  KvCacheConfig config_;
  PageLayout layout_;
  KvCacheConfig band_config_;  // the band's format (KvCacheConfig::band_config())
  PageLayout band_layout_;     // bits == 0 without a band
  KvPageCounts capacity_;
  // Per layer; each page's memory is touched only when a sequence first writes it.
  std::vector<ZeroedMemory> full_arenas_;
  std::vector<ZeroedMemory> quantized_arenas_;
  std::vector<ZeroedMemory> band_arenas_;
  std::vector<float> key_feedback_;    // [layers][kv_heads][D][D], or empty
  std::vector<float> value_feedback_;  // [layers][kv_heads][D][D], or empty
};

}  // namespace oscar
