#pragma once
// Prefix caching: a radix tree over token ids whose edges are whole pages. A node holds the pages
// (full-precision and/or quantized) of one page of some sequence's prefix, with a reference of its
// own, so later requests that start with the same tokens reuse them and skip that prefill. Under
// the decode rule a token's K/V and its quantized bytes depend only on the tokens up to it, so a
// hit gives exactly the answer a cold run gives. Unreferenced leaves are evicted least recently
// used first when the pools run dry, then the full-precision and band copies no sequence holds.
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "kvcache/kv_cache_config.h"
#include "kvcache/page_pool.h"
#include "kvcache/sequence_pages.h"

namespace oscar {

class PrefixCache {
 public:
  struct Node;
  // What one sequence has recorded so far: the tree nodes of its pages, pinned against eviction.
  struct Cursor {
    std::vector<Node*> path;
  };

  PrefixCache(const KvCacheConfig& kv, KvPagePools& pools);
  ~PrefixCache();  // returns every cached page to the pools
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // Attaches the longest usable cached prefix of `tokens`, at most `max_tokens` long, to the
  // empty `pages`; returns the tokens attached (a multiple of the page size).
  int64_t attach(std::span<const int32_t> tokens, int64_t max_tokens, SequencePages& pages,
                 Cursor& cursor);
  // Records the sequence's pages that are complete (call after every step).
  void insert(std::span<const int32_t> tokens, const SequencePages& pages, Cursor& cursor);
  // Unpins the cursor's nodes (the sequence ended or was preempted).
  void release(Cursor& cursor);
  // Frees pages until the pools have `needed` free: evicts unreferenced leaves, oldest first, then
  // gives up the full-precision and band copies that only the cache holds (drop_unshared_copies).
  bool evict(KvPageCounts needed);
  // Evicts every page no running sequence pins.
  void evict_unpinned();

  int64_t cached_pages() const;
  // The cached pages no sequence pins: held by the cache alone, which gives them up (evict) when
  // the pools run dry.
  const KvPageCounts& unpinned_pages() const { return unpinned_pages_; }

 private:
  void pin(Node& node);
  void unpin(Node& node);
  bool usable(const std::vector<Node*>& path, int64_t pages, int64_t sequence_tokens) const;
  void touch(Node* node);
  void release_pages(const LogicalPage& pages);
  void record_quantized(Node& node, const LogicalPage& page);
  bool evict_leaves(KvPageCounts needed);
  bool drop_unshared_copies(KvPageCounts needed);

  const KvCacheConfig& kv_;
  KvPagePools& pools_;
  std::unique_ptr<Node> root_;
  uint64_t clock_ = 0;
  KvPageCounts unpinned_pages_;
};

}  // namespace oscar
