// What the prefix cache gives up when the pools run dry while every cached page belongs to a
// running sequence's path: the full-precision and band copies it alone holds, never a page the
// sequence holds. The cache and the pages are driven directly, as Engine::run_batch does.
#include <gtest/gtest.h>

#include <numeric>

#include "engine/prefix_cache.h"
#include "support/kv_configs.h"

namespace oscar {
namespace {

TEST(PrefixCacheEviction, DropsOnlyTheCopiesNoSequenceHolds) {
  KvCacheConfig kv = testing::small_window_int2();
  kv.band_tokens = 64;
  KvPagePools pools(KvPageCounts{64, 64, 64});
  PrefixCache cache(kv, pools);
  PrefixCache::Cursor cursor;
  SequencePages sequence;
  std::vector<int32_t> tokens(320);
  std::iota(tokens.begin(), tokens.end(), 0);
  while (sequence.num_tokens() < int64_t(tokens.size())) {
    ASSERT_TRUE(sequence.reserve(64, kv, pools));
    sequence.commit(64, kv, pools);
    cache.insert(tokens, sequence, cursor);
  }
  auto held = [&](auto page_id) {
    int64_t count = 0;
    for (const LogicalPage& page : sequence.pages()) count += page_id(page) >= 0;
    return count;
  };
  const int64_t own_full = held([](const LogicalPage& p) { return p.full; });
  const int64_t own_band = held([](const LogicalPage& p) { return p.band; });
  const int64_t own_quantized = held([](const LogicalPage& p) { return p.quantized; });
  // The cache keeps band copies and window pages the sequence has moved past.
  ASSERT_GT(pools.band.used_pages(), own_band);
  ASSERT_GT(pools.full.used_pages(), own_full);
  // One band page more than are free: one copy goes, and the eviction succeeds.
  const int32_t band_used = pools.band.used_pages();
  EXPECT_TRUE(cache.evict({0, 0, pools.band.free_pages() + int64_t(1)}));
  EXPECT_EQ(pools.band.used_pages(), band_used - 1);
  // Asking for every band page: the cache's own band copies go, the sequence's stay, and the
  // full pages, which were not asked for, stay too.
  const int32_t full_used = pools.full.used_pages();
  EXPECT_FALSE(cache.evict({0, 0, pools.band.capacity()}));
  EXPECT_EQ(pools.band.used_pages(), own_band);
  EXPECT_EQ(pools.full.used_pages(), full_used);
  EXPECT_EQ(pools.quantized.used_pages(), own_quantized);
  // Then full pages: all but those the sequence holds.
  EXPECT_FALSE(cache.evict({pools.full.capacity(), 0, 0}));
  EXPECT_EQ(pools.full.used_pages(), own_full);
  for (const LogicalPage& page : sequence.pages()) {
    if (page.full >= 0) {
      EXPECT_GE(pools.full.ref_count(page.full), 1);
    }
    if (page.band >= 0) {
      EXPECT_GE(pools.band.ref_count(page.band), 1);
    }
  }
  cache.release(cursor);
  sequence.release_all(pools);
}

}  // namespace
}  // namespace oscar
