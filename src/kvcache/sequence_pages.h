#pragma once
// One sequence's page table. Logical page p covers token positions [p * P, (p + 1) * P); it may
// have a full-precision page (while any of its tokens is a sink token or still in the recent
// window), a quantized page (once any of its tokens left the window), or both during the move,
// and, with a band (KvCacheConfig::band_tokens), a 4-bit band page while any of its quantized
// tokens is in the band.
//
// A step writes `count` new tokens: reserve() allocates what they need, the backend writes them
// (and quantizes the tokens that left the window, reading them from their full pages), then
// commit() advances the counters and frees full pages that hold no token still read in full
// precision.
#include <cstdint>
#include <vector>

#include "kvcache/kv_cache_config.h"
#include "kvcache/page_pool.h"

namespace oscar {

struct LogicalPage {
  int32_t full = -1;
  int32_t quantized = -1;
  int32_t band = -1;
};

class SequencePages {
 public:
  SequencePages() = default;
  explicit SequencePages(int64_t full_precision_until)
      : full_precision_until_(full_precision_until) {}

  int64_t num_tokens() const { return num_tokens_; }
  int64_t full_precision_until() const { return full_precision_until_; }
  void set_full_precision_until(int64_t tokens) { full_precision_until_ = tokens; }
  const std::vector<LogicalPage>& pages() const { return pages_; }

  // Pages that `count` more tokens would need from each pool (for admission decisions).
  KvPageCounts pages_needed(int64_t count, const KvCacheConfig& config) const;
  // Allocates them; on a dry pool allocates nothing and returns false.
  bool reserve(int64_t count, const KvCacheConfig& config, KvPagePools& pools);
  void commit(int64_t count, const KvCacheConfig& config, KvPagePools& pools);
  // Returns every page to the pools (the sequence ends or is preempted).
  void release_all(KvPagePools& pools);
  // Starts an empty sequence from `num_tokens` already cached tokens whose pages the caller has
  // retained for it (prefix cache hit).
  void attach_prefix(std::vector<LogicalPage> pages, int64_t num_tokens);

 private:
  bool needs_full(int64_t page, int64_t num_tokens, const KvCacheConfig& config) const;
  bool needs_quantized(int64_t page, int64_t num_tokens, const KvCacheConfig& config) const;
  bool needs_band(int64_t page, int64_t num_tokens, const KvCacheConfig& config) const;
  // Whether page p is needed in each format while a step grows the sequence by `count` tokens.
  bool full_during_step(int64_t page, int64_t count, const KvCacheConfig& config) const;
  bool band_during_step(int64_t page, int64_t count, const KvCacheConfig& config) const;

  std::vector<LogicalPage> pages_;
  int64_t num_tokens_ = 0;
  int64_t full_precision_until_ = 0;
};

}  // namespace oscar
