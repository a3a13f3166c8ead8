// A sequence's page table through reserve/commit steps, checked against the decode rule.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include <fmt/format.h>

#include "kvcache/page_layout.h"
#include "kvcache/sequence_pages.h"
#include "util/error.h"

namespace oscar {
namespace {

bool overlaps(int64_t page, int64_t size, int64_t begin, int64_t end) {
  return begin < end && page * size < end && (page + 1) * size > begin;
}

KvCacheConfig small_int2(KvMethod method) {
  KvCacheConfig c;
  c.dtype = KvDtype::int2;
  c.method = method;
  c.group_size = 32;
  c.sink_tokens = 20;
  c.recent_tokens = 40;
  c.page_size_tokens = 32;
  return c;
}

void expect_pages_match_rule(const SequencePages& s, const KvCacheConfig& c) {
  const int64_t n = s.num_tokens();
  const int64_t qend = quantized_end(c, n, s.full_precision_until());
  for (int64_t p = 0; p < int64_t(s.pages().size()); ++p) {
    const bool full = overlaps(p, c.page_size_tokens, 0, std::min(c.sink_tokens, n)) ||
                      overlaps(p, c.page_size_tokens, qend, n);
    const bool quantized = overlaps(p, c.page_size_tokens, c.sink_tokens, qend);
    const bool band =
        overlaps(p, c.page_size_tokens, band_begin(c, n, s.full_precision_until()), qend);
    EXPECT_EQ(s.pages()[size_t(p)].full >= 0, full) << "page " << p << " at " << n << " tokens";
    EXPECT_EQ(s.pages()[size_t(p)].quantized >= 0, quantized) << "page " << p << " at " << n;
    EXPECT_EQ(s.pages()[size_t(p)].band >= 0, band) << "page " << p << " at " << n;
  }
}

KvCacheConfig with_band(KvCacheConfig c, int64_t band_tokens) {
  c.band_tokens = band_tokens;
  return c;
}

TEST(SequencePages, PagesFollowTheRuleThroughRandomSteps) {
  const KvCacheConfig configs[] = {small_int2(KvMethod::naive), small_int2(KvMethod::kivi),
                                   with_band(small_int2(KvMethod::naive), 100)};
  for (const KvCacheConfig& c : configs) {
    for (const int64_t until : {int64_t(0), int64_t(300)}) {
      SCOPED_TRACE(describe(c) + " full precision until " + std::to_string(until));
      // Band pages: at most the band and a chunk of 70 (the pool sizes capacity_for_sequences
      // gives).
      const int64_t band_capacity = capacity_for_sequences(c, 1200, 1, 70).band;
      EXPECT_EQ(band_capacity, c.has_band() ? (100 + 70 + 31) / 32 + 2 : 0);
      KvPagePools pools{PagePool(64), PagePool(64), PagePool(int32_t(band_capacity))};
      SequencePages s(until);
      std::mt19937 rng(1);
      std::uniform_int_distribution<int64_t> chunk(1, 70);
      while (s.num_tokens() < 1200) {
        const int64_t count = chunk(rng);
        const KvPageCounts needed = s.pages_needed(count, c);
        const int32_t free_full = pools.full.free_pages(),
                      free_quantized = pools.quantized.free_pages();
        const int32_t free_band = pools.band.free_pages();
        ASSERT_TRUE(s.reserve(count, c, pools)) << "at " << s.num_tokens() << " tokens + " << count;
        EXPECT_EQ(free_full - pools.full.free_pages(), needed.full);
        EXPECT_EQ(free_quantized - pools.quantized.free_pages(), needed.quantized);
        EXPECT_EQ(free_band - pools.band.free_pages(), needed.band);
        // Every position a query of this step reads from the band has a band page.
        const int64_t after = s.num_tokens() + count;
        for (int64_t j = band_step_begin(c, s.num_tokens(), after, until);
             j < quantized_end(c, after, until); ++j) {
          ASSERT_GE(s.pages()[size_t(j / c.page_size_tokens)].band, 0) << "position " << j;
        }
        s.commit(count, c, pools);
        expect_pages_match_rule(s, c);
      }
      s.release_all(pools);
      EXPECT_EQ(pools.full.free_pages(), 64);
      EXPECT_EQ(pools.quantized.free_pages(), 64);
      EXPECT_EQ(pools.band.free_pages(), band_capacity);
    }
  }
}

TEST(SequencePages, DryPoolAllocatesNothing) {
  const KvCacheConfig c = small_int2(KvMethod::naive);
  KvPagePools pools{PagePool(3), PagePool(8)};
  SequencePages s;
  ASSERT_TRUE(s.reserve(64, c, pools));
  s.commit(64, c, pools);
  const int32_t free_full = pools.full.free_pages(), free_quantized = pools.quantized.free_pages();
  EXPECT_EQ(free_full, 1);
  EXPECT_FALSE(s.reserve(200, c, pools));  // needs more full pages than the one left
  EXPECT_EQ(pools.full.free_pages(), free_full);
  EXPECT_EQ(pools.quantized.free_pages(), free_quantized);
  EXPECT_EQ(s.num_tokens(), 64);
}

TEST(PagePool, ReferenceCounts) {
  PagePool pool(2);
  const auto a = pool.allocate();
  ASSERT_TRUE(a);
  pool.retain(*a);
  pool.release(*a);
  EXPECT_EQ(pool.free_pages(), 1);
  pool.release(*a);
  EXPECT_EQ(pool.free_pages(), 2);
  EXPECT_THROW(pool.release(*a), Error);
  EXPECT_THROW(pool.retain(7), Error);
}

// Pools sized for a step budget (capacity_for_sequences, capacity_for_bytes) hold sequences that
// grow by any split of that budget at each step: a few long chunks, many short ones, decodes; a
// sequence that reaches its length ends and a new prompt starts in its place.
TEST(SequencePages, PoolsForAStepBudgetHoldEverySplitOfIt) {
  const KvCacheConfig configs[] = {KvCacheConfig{}, small_int2(KvMethod::naive),
                                   small_int2(KvMethod::kivi),
                                   with_band(small_int2(KvMethod::naive), 100)};
  const int64_t num_sequences = 5, tokens = 700, budget = 320;
  for (const KvCacheConfig& c : configs) {
    const PageLayout layout = make_page_layout(c, 2, 64);
    const KvPageCounts counted = capacity_for_sequences(c, tokens, num_sequences, budget);
    // Bytes enough that neither cap of capacity_for_bytes binds: only its page counts are tested.
    KvPageCounts of_bytes =
        capacity_for_bytes(c, layout, 1, int64_t(1) << 30, num_sequences, budget);
    of_bytes.quantized = counted.quantized;
    for (const KvPageCounts& capacity : {counted, of_bytes}) {
      SCOPED_TRACE(describe(c) +
                   fmt::format(": pools of {} full, {} band pages", capacity.full, capacity.band));
      KvPagePools pools(capacity);
      std::vector<SequencePages> sequences(num_sequences);
      std::mt19937 rng(3);
      for (int step = 0; step < 400; ++step) {
        // The budget split among the sequences at random cut points, each piece cut to the
        // sequence's length.
        std::vector<int64_t> cuts = {0, budget};
        for (int64_t s = 1; s < num_sequences; ++s)
          cuts.push_back(std::uniform_int_distribution<int64_t>(0, budget)(rng));
        std::sort(cuts.begin(), cuts.end());
        std::vector<int64_t> counts(num_sequences);
        for (int64_t s = 0; s < num_sequences; ++s) {
          counts[size_t(s)] = std::min(cuts[size_t(s) + 1] - cuts[size_t(s)],
                                       tokens - sequences[size_t(s)].num_tokens());
          ASSERT_TRUE(sequences[size_t(s)].reserve(counts[size_t(s)], c, pools))
              << "step " << step << ", sequence " << s << " at "
              << sequences[size_t(s)].num_tokens() << " + " << counts[size_t(s)];
        }
        for (int64_t s = 0; s < num_sequences; ++s) {
          SequencePages& sequence = sequences[size_t(s)];
          sequence.commit(counts[size_t(s)], c, pools);
          if (sequence.num_tokens() == tokens)
            sequence.release_all(pools);  // a new prompt takes its place
        }
      }
      for (SequencePages& sequence : sequences) sequence.release_all(pools);
      EXPECT_EQ(pools.full.free_pages(), capacity.full);
    }
  }
}

}  // namespace
}  // namespace oscar
