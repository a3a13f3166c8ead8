// The GPU benchmarks' sequences (bench_gpu_common.h): filled in chunks through the engine's page
// rule, they hold the same pages as a sequence that decoded token by token, within the pool
// capacity the benchmarks allocate, and never share a page.
#include <gtest/gtest.h>

#include <array>
#include <set>
#include <vector>

#include "cli/bench_gpu_common.h"
#include "util/error.h"

namespace oscar::cli {
namespace {

KvCacheConfig int2_cache(int64_t band_tokens) {
  KvCacheConfig kv;
  kv.dtype = KvDtype::int2;
  kv.group_size = 128;
  kv.sink_tokens = 64;
  kv.recent_tokens = 256;
  kv.band_tokens = band_tokens;
  kv.page_size_tokens = 64;
  return kv;
}

// Which of a page's three kinds each logical page holds.
std::vector<std::array<bool, 3>> kinds(const SequencePages& sequence) {
  std::vector<std::array<bool, 3>> out;
  for (const LogicalPage& page : sequence.pages())
    out.push_back({page.full >= 0, page.quantized >= 0, page.band >= 0});
  return out;
}

TEST(BenchSequences, FilledInChunksTheyHoldTheDecodedPagesWithinTheBenchCapacity) {
  for (const KvCacheConfig& kv : {int2_cache(0), int2_cache(768), KvCacheConfig{}}) {
    for (const int64_t context : {37, 700, 3000, 5000}) {
      const int64_t batch = 3;
      KvPagePools pools(bench_pool_capacity(kv, context + 1, batch));
      std::vector<SequencePages> sequences = fill_sequences(kv, pools, context, batch);
      ASSERT_EQ(sequences.size(), size_t(batch));
      // One token at a time from empty, in pools of their own.
      KvPagePools decode_pools(capacity_for_sequences(kv, context, 1, 1));
      SequencePages decoded;
      for (int64_t t = 0; t < context; ++t) {
        ASSERT_TRUE(decoded.reserve(1, kv, decode_pools)) << describe(kv) << ", token " << t;
        decoded.commit(1, kv, decode_pools);
      }
      std::set<int32_t> full, quantized, band;
      for (SequencePages& sequence : sequences) {
        EXPECT_EQ(sequence.num_tokens(), context);
        EXPECT_EQ(kinds(sequence), kinds(decoded)) << describe(kv) << ", context " << context;
        // The pages of the next token, as the decode-attention benchmark reserves them.
        EXPECT_TRUE(sequence.reserve(1, kv, pools)) << describe(kv) << ", context " << context;
        for (const LogicalPage& page : sequence.pages()) {
          EXPECT_TRUE(page.full < 0 || full.insert(page.full).second)
              << "full page " << page.full << " shared";
          EXPECT_TRUE(page.quantized < 0 || quantized.insert(page.quantized).second)
              << "page " << page.quantized;
          EXPECT_TRUE(page.band < 0 || band.insert(page.band).second)
              << "band page " << page.band << " shared";
        }
      }
      EXPECT_EQ(!quantized.empty(), context > kv.sink_tokens + kv.recent_tokens && kv.quantized())
          << describe(kv) << ", context " << context;
      EXPECT_EQ(!band.empty(), context > kv.sink_tokens + kv.recent_tokens && kv.has_band())
          << describe(kv) << ", context " << context;
    }
  }
}

// Sharing pages (the bf16 decode step of a batch that does not fit): sequence s >= distinct holds
// the whole pages of sequence s % distinct, counted once more in the pool, and pages of its own
// from the partial last one on, which no other sequence holds: one it will write into.
TEST(BenchSequences, SharingSequencesReadTheirPairsPagesAndWriteTheirOwn) {
  const KvCacheConfig kv;  // bf16, 64-token pages
  const int64_t context = 3000, batch = 5, distinct = 3, steps = 8;
  KvPageCounts capacity = bench_pool_capacity(kv, context + steps, distinct);
  capacity.full += (batch - distinct) * 2;
  KvPagePools pools(capacity);
  std::vector<SequencePages> sequences =
      fill_sequences_sharing_pages(kv, pools, context, batch, distinct);
  ASSERT_EQ(sequences.size(), size_t(batch));
  const size_t shared = size_t(context / kv.page_size_tokens);
  std::set<int32_t> own;
  for (int64_t s = 0; s < batch; ++s) {
    SequencePages& sequence = sequences[size_t(s)];
    EXPECT_EQ(sequence.num_tokens(), context);
    for (int step = 0; step < steps; ++step) {
      ASSERT_TRUE(sequence.reserve(1, kv, pools)) << "sequence " << s << ", step " << step;
      sequence.commit(1, kv, pools);
    }
    const std::vector<LogicalPage>& pages = sequence.pages();
    ASSERT_GT(pages.size(), shared);
    for (size_t p = 0; p < pages.size(); ++p) {
      if (p >= shared) {
        EXPECT_TRUE(own.insert(pages[p].full).second)
            << "page " << pages[p].full << " written by two sequences";
      } else if (s >= distinct) {
        EXPECT_EQ(pages[p].full, sequences[size_t(s % distinct)].pages()[p].full)
            << "sequence " << s << ", page " << p;
      }
    }
  }
  EXPECT_THROW(fill_sequences_sharing_pages(int2_cache(0), pools, context, batch, distinct), Error);
}

TEST(BenchSequences, TooSmallPoolsAreAnError) {
  const KvCacheConfig kv = int2_cache(768);
  KvPagePools pools(bench_pool_capacity(kv, 5001, 1));
  EXPECT_THROW(fill_sequences(kv, pools, 5000, 2), Error);
}

}  // namespace
}  // namespace oscar::cli
