// Prefix caching: hits skip prefill of whole shared pages (full-precision and quantized) and give
// exactly the answers of a cold run; cached pages are evicted when the pool needs them, and those
// no request uses count as free in the KV-cache usage.
#include <gtest/gtest.h>

#include <map>

#include "engine/engine.h"
#include "format/documents.h"
#include "model/model_weights.h"
#include "support/test_paths.h"
#include "support/testbed.h"
#include "tokenizer/tokenizer.h"

namespace oscar {
namespace {

std::unique_ptr<Engine> make_engine(bool prefix_caching, KvPageCounts capacity,
                                    int64_t band_tokens = 0) {
  BackendOptions options;
  options.kv.dtype = KvDtype::int2;
  options.kv.method = KvMethod::quarot;
  options.kv.sink_tokens = 16;
  options.kv.recent_tokens = 32;
  options.kv.page_size_tokens = 16;
  options.kv.band_tokens = band_tokens;
  options.capacity = capacity;
  EngineOptions engine_options;
  engine_options.prefix_caching = prefix_caching;
  engine_options.scheduler.max_num_seqs = 4;
  engine_options.scheduler.prefill_chunk_tokens = 64;
  return std::make_unique<Engine>(make_backend(testing::testbed_weights(), options),
                                  &testing::testbed_tokenizer(), engine_options);
}

std::vector<int32_t> shared_prefix() {
  const auto documents = read_documents(testing::testbed_model_dir() + "/valid.xz");
  auto ids = testing::testbed_tokenizer().encode(documents[3]);
  ids.resize(200);
  return ids;
}

struct Result {
  std::vector<int32_t> tokens;
  int64_t cached = 0;
};

Result run_one(Engine& engine, std::vector<int32_t> prompt) {
  GenerationRequest request;
  request.prompt = std::move(prompt);
  request.sampling.temperature = 0;
  request.stop.max_tokens = 24;
  engine.submit(request);
  Result result;
  while (!engine.idle()) {
    for (const auto& out : engine.step()) {
      result.tokens.insert(result.tokens.end(), out.tokens.begin(), out.tokens.end());
      result.cached = out.cached_prompt_tokens;
    }
  }
  return result;
}

TEST(PrefixCache, HitsGiveTheColdAnswerAndSkipSharedPages) {
  auto cached = make_engine(true, {64, 64});
  auto cold = make_engine(false, {64, 64});
  const std::vector<std::string> suffixes = {" The pass key is", " int main(void) {",
                                             "\n\nstatic int"};
  for (size_t i = 0; i < suffixes.size(); ++i) {
    auto prompt = shared_prefix();
    const auto tail = testing::testbed_tokenizer().encode(suffixes[i]);
    prompt.insert(prompt.end(), tail.begin(), tail.end());
    const Result with_cache = run_one(*cached, prompt);
    const Result without = run_one(*cold, prompt);
    EXPECT_EQ(with_cache.tokens, without.tokens) << suffixes[i];
    if (i == 0) {
      EXPECT_EQ(with_cache.cached, 0);
    } else {
      // 200 shared tokens = 12 whole pages of 16; quantized pages among them are shared too.
      EXPECT_EQ(with_cache.cached, 192) << suffixes[i];
    }
  }
  EXPECT_EQ(cached->counters().cached_prompt_tokens, 2 * 192);
  EXPECT_GT(cached->prefix_cache()->cached_pages(), 12);
}

// With a band, a hit also shares the band pages the attached length reads (192 tokens: quantized
// [16, 160), the band [112, 160)).
TEST(PrefixCache, BandPagesAreSharedToo) {
  auto cached = make_engine(true, {64, 64, 16}, 48);
  auto cold = make_engine(false, {64, 64, 16}, 48);
  for (const std::string suffix : {" The pass key is", " int main(void) {"}) {
    auto prompt = shared_prefix();
    const auto tail = testing::testbed_tokenizer().encode(suffix);
    prompt.insert(prompt.end(), tail.begin(), tail.end());
    const Result with_cache = run_one(*cached, prompt);
    EXPECT_EQ(with_cache.tokens, run_one(*cold, prompt).tokens) << suffix;
    EXPECT_EQ(with_cache.cached, suffix[1] == 'T' ? 0 : 192) << suffix;
  }
  cached->reset_prefix_cache();
  EXPECT_EQ(cached->pools().band.free_pages(), 16);
  EXPECT_EQ(cold->pools().band.free_pages(), 16);
}

TEST(PrefixCache, RepeatingAPromptReusesItsOwnPages) {
  auto engine = make_engine(true, {64, 64});
  const auto prompt = shared_prefix();
  const Result first = run_one(*engine, prompt);
  const Result second = run_one(*engine, prompt);
  EXPECT_EQ(first.tokens, second.tokens);
  EXPECT_EQ(second.cached, 192);  // all but the last partial page and one token to compute
}

TEST(PrefixCache, CachedPagesAreEvictedWhenThePoolNeedsThem) {
  // Room for about one sequence: every new prompt must evict what the previous one cached.
  auto engine = make_engine(true, {14, 14});
  const auto documents = read_documents(testing::testbed_model_dir() + "/valid.xz");
  for (int d = 10; d < 16; ++d) {
    auto prompt = testing::testbed_tokenizer().encode(documents[size_t(d)]);
    prompt.resize(150);
    EXPECT_EQ(run_one(*engine, prompt).tokens.size(), 24u) << "document " << d;
  }
  EXPECT_LE(engine->pools().full.used_pages(), 14);
  EXPECT_GT(engine->prefix_cache()->cached_pages(), 0);
  engine->reset_prefix_cache();
  EXPECT_EQ(engine->prefix_cache()->cached_pages(), 0);
  EXPECT_EQ(engine->pools().full.free_pages(), 14);
  EXPECT_EQ(engine->pools().quantized.free_pages(), 14);
}

int64_t total(const KvPageCounts& pages) {
  return pages.full + pages.quantized + pages.band;
}

TEST(PrefixCache, PagesNoRequestUsesCountAsFree) {
  auto engine = make_engine(true, {64, 64, 16}, 48);
  const PrefixCache& cache = *engine->prefix_cache();
  EXPECT_EQ(engine->kv_cache_usage(), 0);
  run_one(*engine, shared_prefix());
  // Idle: every cached page is the cache's alone, and the pools count as empty.
  EXPECT_GT(cache.cached_pages(), 12);
  EXPECT_EQ(total(cache.unpinned_pages()), cache.cached_pages());
  EXPECT_GT(engine->pools().full.used_pages(), 0);
  EXPECT_EQ(engine->kv_cache_usage(), 0);
  // A request that starts from the cached prefix pins it: those pages are in use again.
  auto prompt = shared_prefix();
  const auto tail = testing::testbed_tokenizer().encode(" int main(void) {");
  prompt.insert(prompt.end(), tail.begin(), tail.end());
  GenerationRequest request;
  request.prompt = prompt;
  request.sampling.temperature = 0;
  request.stop.max_tokens = 24;
  engine->submit(request);
  engine->step();
  EXPECT_LT(total(cache.unpinned_pages()), cache.cached_pages());
  const double usage = engine->kv_cache_usage();
  // The fullest pool's share of the pages requests hold: the quantized pages of the attached prefix
  // and the full-precision pages of its sink and window.
  EXPECT_GT(usage, 0);
  EXPECT_GE(usage,
            double(engine->pools().quantized.used_pages() - cache.unpinned_pages().quantized) / 64);
  EXPECT_GE(usage, double(engine->pools().full.used_pages() - cache.unpinned_pages().full) / 64);
  while (!engine->idle()) engine->step();
  EXPECT_EQ(total(cache.unpinned_pages()), cache.cached_pages());
  EXPECT_EQ(engine->kv_cache_usage(), 0);
  engine->reset_prefix_cache();
  EXPECT_EQ(total(cache.unpinned_pages()), 0);
  EXPECT_EQ(engine->pools().full.used_pages(), 0);
}

}  // namespace
}  // namespace oscar
