// The tensor-core prefill kernel's jobs (backend/cuda/prefill_jobs.h), replayed on the host against
// the decode rule of kvcache/kv_cache_config.h: every (row, key) pair of a block item is read by
// exactly one job, in the format the rule gives it, a job read whole (unmasked) holds no pair
// that must not be read, and a masked job's ranges (row_keys) read exactly the pairs the rule
// reads. No GPU needed.
#include <gtest/gtest.h>

#ifdef OSCAR_HAVE_CUDA

#include <random>
#include <string>
#include <vector>

#include "backend/cuda/prefill_jobs.h"
#include "kvcache/kv_cache_config.h"

namespace oscar::cuda {
namespace {

KeyPages rule_pages(const KvCacheConfig& kv, int key, int position) {
  const int64_t end = quantized_end(kv, position + 1), band = band_begin(kv, position + 1);
  if (key >= kv.sink_tokens && key < end) return key >= band ? KeyPages::band : KeyPages::quantized;
  return KeyPages::full;
}

// A block item of `tokens` consecutive positions from `first`, reading keys [key_begin, last + 1):
// the first wrong pair, or "" when every pair is read once in its format.
std::string replay_item(const KvCacheConfig& kv, int first, int tokens, int key_begin) {
  const int last = first + tokens - 1;
  auto end_of = [&](int t) { return int(quantized_end(kv, t + 1)); };
  auto band_of = [&](int t) { return int(band_begin(kv, t + 1)); };
  const ItemBounds b{key_begin,     last + 1,       int(kv.sink_tokens), first,
                     last,          end_of(first),  end_of(last),        band_of(first),
                     band_of(last), kv.quantized(), kv.has_band()};
  std::vector<std::vector<int>> reads_of(size_t(tokens), std::vector<int>(size_t(last + 1), 0));
  for (Job job = first_job(b); job.tile < b.key_end; job = next_job(b, job)) {
    const bool whole = job_is_whole(b, job);
    for (int t = first; t <= last; ++t) {
      // As the kernel masks: from the first key of the thread's columns (an even offset).
      const int column = job.tile + 2 * (t % 4);
      const RowKeys keys = row_keys(b, t, end_of(t), band_of(t), job.pages, column);
      for (int key = job.tile; key < job.tile + kPrefillTileKeys; ++key) {
        const bool by_rule = key >= b.key_begin && key < b.key_end &&
                             reads(key, t, end_of(t), band_of(t), b.sink, job.pages);
        if (keys.reads_at(key - column) != by_rule) {
          return "position " + std::to_string(t) + ", key " + std::to_string(key) + ": tile " +
                 std::to_string(job.tile) + " as " + std::to_string(int(job.pages)) +
                 ": row_keys says " + (by_rule ? "not read" : "read") + ", the rule the opposite";
        }
        const bool read = whole || keys.reads_at(key - column);
        if (!read) continue;
        if (key < key_begin || key > t || rule_pages(kv, key, t) != job.pages) {
          return "position " + std::to_string(t) + ", key " + std::to_string(key) + ": tile " +
                 std::to_string(job.tile) + " read as " + std::to_string(int(job.pages)) +
                 (whole ? " (whole)" : "");
        }
        ++reads_of[size_t(t - first)][size_t(key)];
      }
    }
  }
  for (int t = first; t <= last; ++t) {
    for (int key = key_begin; key <= t; ++key) {
      const int n = reads_of[size_t(t - first)][size_t(key)];
      if (n != 1) {
        return "position " + std::to_string(t) + ", key " + std::to_string(key) + " read " +
               std::to_string(n) + " times";
      }
    }
  }
  return "";
}

// Random items over the sinks, windows and bands of the GPU tests' formats, rows of GQA 1 to 8
// (128 / group tokens an item), from the sequence's start to past every boundary, some reading
// from a key past 0.
TEST(PrefillJobs, EveryPairIsReadOnceInItsFormat) {
  std::mt19937 rng(40);
  auto pick = [&](std::vector<int> values) {
    return values[std::uniform_int_distribution<size_t>(0, values.size() - 1)(rng)];
  };
  for (int item = 0; item < 300; ++item) {
    KvCacheConfig kv;
    kv.dtype = item % 10 == 0 ? KvDtype::bf16 : KvDtype::int2;
    kv.sink_tokens = pick({4, 40, 64});
    kv.recent_tokens = pick({64, 256});
    kv.band_tokens = pick({0, 100, 300, 768});
    const int tokens = 128 / pick({1, 2, 4, 8});
    const int first = std::uniform_int_distribution<int>(0, 2500)(rng);
    const int key_begin = item % 3 == 0 ? std::uniform_int_distribution<int>(0, first)(rng) : 0;
    const std::string wrong = replay_item(kv, first, tokens, key_begin);
    EXPECT_EQ(wrong, "") << describe(kv) << ", " << tokens << " tokens from " << first
                         << ", keys from " << key_begin;
  }
}

// A block's padding rows (past the item's tokens: position -1, as the kernel's row_bounds gives
// them) read no key in any format, even where the item reads from key 0.
TEST(PrefillJobs, PaddingRowsReadNoKey) {
  const ItemBounds b{0, 3000, 64, 2000, 2031, 1500, 1531, 700, 731, true, true};
  for (KeyPages pages : {KeyPages::full, KeyPages::quantized, KeyPages::band}) {
    for (int tile = 0; tile < b.key_end; tile += kPrefillTileKeys) {
      const RowKeys keys = row_keys(b, -1, 0, 0, pages, tile);
      for (int c = 0; c < kPrefillTileKeys; ++c) {
        EXPECT_FALSE(keys.reads_at(c)) << "format " << int(pages) << ", key " << tile + c;
      }
    }
  }
}

}  // namespace
}  // namespace oscar::cuda

#endif  // OSCAR_HAVE_CUDA
