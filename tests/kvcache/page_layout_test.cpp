// The page layout and the byte accounting built on it.
#include <gtest/gtest.h>

#include <set>

#include "kvcache/page_layout.h"
#include "util/error.h"

namespace oscar {
namespace {

KvCacheConfig int2_config(int group, KvMethod method = KvMethod::naive) {
  KvCacheConfig c;
  c.dtype = KvDtype::int2;
  c.method = method;
  c.group_size = group;
  c.page_size_tokens = 128;
  return c;
}

TEST(PageLayout, QuantizedSectionsTileThePageWithoutOverlap) {
  for (const KvMethod method : {KvMethod::naive, KvMethod::kivi}) {
    for (const int group : {32, 64, 128}) {
      const PageLayout l = make_page_layout(int2_config(group, method), 8, 128);
      std::set<int64_t> used;
      auto mark = [&](int64_t offset, int64_t size) {
        for (int64_t b = offset; b < offset + size; ++b) {
          ASSERT_TRUE(used.insert(b).second) << "byte " << b << " used twice";
          ASSERT_LT(b, l.quantized_page_bytes);
        }
      };
      for (int64_t h = 0; h < 8; ++h) {
        for (int64_t slot = 0; slot < 128; ++slot) {
          mark(l.key_codes(h, slot), l.code_bytes_per_row);
          mark(l.value_codes(h, slot), l.code_bytes_per_row);
          for (int64_t g = 0; g < 128 / group; ++g) mark(l.value_params(h, slot, g), l.param_bytes);
          if (!l.keys_per_channel) {
            for (int64_t g = 0; g < 128 / group; ++g) mark(l.key_params(h, slot, g), l.param_bytes);
          } else if (slot % group == 0) {
            for (int64_t c = 0; c < 128; ++c) mark(l.key_params(h, slot, c), l.param_bytes);
          }
        }
      }
      EXPECT_GE(int64_t(used.size()),
                l.quantized_page_bytes - 15);  // only alignment padding unused
      EXPECT_EQ(l.quantized_page_bytes % 16, 0);
    }
  }
}

TEST(PageLayout, FullPageHoldsKeysThenValues) {
  KvCacheConfig bf16;
  bf16.page_size_tokens = 16;
  const PageLayout l = make_page_layout(bf16, 2, 64);
  EXPECT_EQ(l.full_page_bytes, 2 * 2 * 16 * 64 * 2);
  EXPECT_EQ(l.full_key_offset(1, 3), (16 + 3) * 64 * 2);
  EXPECT_EQ(l.full_value_offset(0, 0), l.full_page_bytes / 2);
}

// Qwen3-8B shape: 8 KV heads, head_dim 128.
TEST(ByteAccounting, BitsPerElementAt128K) {
  struct Case {
    int group;
    int page;
    double expected;
  };
  // 2 bits + 32 parameter bits per group, plus the bf16 sink (64) and window (256 + page slack).
  for (const Case c : {Case{128, 64, 2.25}, Case{64, 64, 2.5}}) {
    KvCacheConfig config = int2_config(c.group);
    config.page_size_tokens = c.page;
    const PageLayout layout = make_page_layout(config, 8, 128);
    const int64_t n = 128 * 1024;
    const KvPageCounts pages = footprint_for_tokens(config, n);
    const double bpe = bits_per_element(layout, pages, n);
    EXPECT_GT(bpe, c.expected);
    EXPECT_LT(bpe, c.expected + 0.045) << "group " << c.group;
  }
  KvCacheConfig bf16;
  const PageLayout layout = make_page_layout(bf16, 8, 128);
  EXPECT_DOUBLE_EQ(bits_per_element(layout, footprint_for_tokens(bf16, 4096), 4096), 16.0);
}

TEST(ByteAccounting, FootprintCountsSinkWindowAndQuantizedPages) {
  KvCacheConfig c = int2_config(128);
  c.page_size_tokens = 64;
  // 1000 tokens: sink page 0, quantized [64, 744) -> pages 1..11, full [744, 1000) -> pages 11..15.
  const KvPageCounts pages = footprint_for_tokens(c, 1000);
  EXPECT_EQ(pages.quantized, 11);
  EXPECT_EQ(pages.full, 1 + 5);
  const KvPageCounts short_sequence = footprint_for_tokens(c, 100);
  EXPECT_EQ(short_sequence.quantized, 0);
  EXPECT_EQ(short_sequence.full, 2);
}

// The band's 4-bit copies come on top of the 2-bit pages, for the pages the band covers.
TEST(ByteAccounting, FootprintCountsTheBand) {
  KvCacheConfig c = int2_config(128);
  c.page_size_tokens = 64;
  c.band_tokens = 768;
  const PageLayout layout = make_page_layout(c, 8, 128);
  // INT4 codes (64 bytes a row) and f16 (scale, zero) per group of 128, keys and values, 8 heads.
  EXPECT_EQ(layout.band_page_bytes, 2 * 8 * 64 * (64 + 4));
  // 1000 tokens: quantized [64, 744), all of it in the band: pages 1..11.
  EXPECT_EQ(footprint_for_tokens(c, 1000).band, 11);
  // 128K: quantized up to 130816, the band [130048, 130816): pages 2032..2043.
  const int64_t n = 128 * 1024;
  const KvPageCounts pages = footprint_for_tokens(c, n);
  EXPECT_EQ(pages.band, 12);
  KvCacheConfig no_band = c;
  no_band.band_tokens = 0;
  const double elements = double(n) * 8 * 128 * 2;
  EXPECT_DOUBLE_EQ(
      bits_per_element(layout, pages, n) -
          bits_per_element(make_page_layout(no_band, 8, 128), footprint_for_tokens(no_band, n), n),
      12.0 * double(layout.band_page_bytes) * 8 / elements);
  // A pool of bytes keeps band pages for every sequence's band and the step's 512 new tokens:
  // two straddled pages each, one band with the step's tokens, fifteen without and their last page.
  const KvPageCounts pool = capacity_for_bytes(c, layout, 36, int64_t(64) << 30, 16, 512);
  EXPECT_EQ(pool.band, 16 * 2 + (768 + 512) / 64 + 15 * (768 / 64 + 1));
  EXPECT_LE(bytes_per_layer(pool, layout) * 36, int64_t(64) << 30);
}

TEST(ByteAccounting, BandNeedsAPerTokenInt2Cache) {
  KvCacheConfig c = int2_config(128);
  c.band_tokens = 256;
  c.method = KvMethod::kivi;
  EXPECT_THROW(validate(c, 128), Error);
  c.method = KvMethod::naive;
  c.dtype = KvDtype::int4;
  EXPECT_THROW(validate(c, 128), Error);
  c.dtype = KvDtype::int2;
  EXPECT_NO_THROW(validate(c, 128));
  c.band_tokens = -1;
  EXPECT_THROW(validate(c, 128), Error);
}

TEST(ByteAccounting, PoolOfBytesKeepsQuantizedPagesWhenSmall) {
  KvCacheConfig c = int2_config(128);
  c.page_size_tokens = 64;
  const PageLayout layout = make_page_layout(c, 8, 128);
  // Large: full-precision pages for every sequence's sink and window (and two straddled pages)
  // and for the step's 512 new tokens once, the rest quantized.
  const KvPageCounts large = capacity_for_bytes(c, layout, 36, int64_t(64) << 30, 16, 512);
  EXPECT_EQ(large.full, 16 * (64 / 64 + 2) + (256 + 512) / 64 + 15 * (256 / 64 + 1));
  EXPECT_GT(large.quantized, 10 * large.full);
  // Small: 64 sequences would want all of it in full precision; half stays quantized.
  const int64_t small_bytes = int64_t(36) * 40 * layout.full_page_bytes;
  const KvPageCounts small = capacity_for_bytes(c, layout, 36, small_bytes, 64, 512);
  EXPECT_EQ(small.full, 20);
  EXPECT_EQ(small.quantized, 20 * layout.full_page_bytes / layout.quantized_page_bytes);
  EXPECT_LE(bytes_per_layer(small, layout) * 36, small_bytes);
}

TEST(ByteAccounting, LongChunksAreCountedOncePerStepNotOncePerSequence) {
  KvCacheConfig c = int2_config(128);
  c.page_size_tokens = 64;
  c.band_tokens = 768;
  const PageLayout layout = make_page_layout(c, 8, 128);
  // 64 sequences and a GPU step of one 8192-token chunk beside 64 decodes: the chunk's 129 pages
  // once, where 64 chunks in flight would take 64 * 129 pages (half the pool, all of it bf16).
  const int64_t step = 8192 + 64;
  const KvPageCounts pool = capacity_for_bytes(c, layout, 36, int64_t(40) << 30, 64, step);
  EXPECT_EQ(pool.full, 64 * (64 / 64 + 2) + (256 + step + 63) / 64 + 63 * (256 / 64 + 1));
  EXPECT_EQ(pool.band, 64 * 2 + (768 + step + 63) / 64 + 63 * (768 / 64 + 1));
  EXPECT_LT(8 * pool.full, 64 * (step / 64));
  EXPECT_EQ(capacity_for_sequences(c, 100000, 64, step).full,
            64 * (footprint_for_tokens(c, 100000).full + 1) + (step + 63) / 64 + 63);
}

}  // namespace
}  // namespace oscar
