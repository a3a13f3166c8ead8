// Many long requests at once through pools sized by the capacity rule (capacity_for_bytes, as
// `oscar serve` sizes them), with prefix caching on: the pages the prefix cache keeps of the
// running sequences must not starve the pools, or the scheduler preempts and prompts are computed
// twice. The backend computes nothing (zero logits): only the engine's bookkeeping runs.
#include <gtest/gtest.h>

#include <random>

#include "engine/engine.h"
#include "kvcache/page_layout.h"
#include "support/zero_logits_backend.h"

namespace oscar {
namespace {

struct ServedRun {
  int64_t preemptions = 0;
  int64_t prompt_tokens_computed = 0;
  int64_t finished = 0;
};

// `requests` prompts of `prompt_tokens` distinct random tokens and `output_tokens` out each, all
// submitted at once, OSCAR's default INT2 layout (sink 64, recent 256, band 768, pages of 64).
ServedRun serve_all_at_once(bool prefix_caching, int64_t requests, int64_t prompt_tokens,
                            int64_t output_tokens) {
  KvCacheConfig kv;
  kv.dtype = KvDtype::int2;
  kv.method = KvMethod::quarot;
  kv.band_tokens = kOscarBandTokens;
  EngineOptions options;
  options.prefix_caching = prefix_caching;
  options.scheduler.max_num_seqs = requests;
  options.scheduler.prefill_chunk_tokens = 1024;
  options.scheduler.max_step_tokens =
      default_max_step_tokens(DeviceKind::cuda, 1024, options.scheduler.max_num_seqs);
  // A byte budget whose full-precision and band shares are the rule's, not its caps.
  const PageLayout layout = make_page_layout(kv, 8, 128);
  const KvPageCounts capacity =
      capacity_for_bytes(kv, layout, 1, int64_t(4) << 30, options.scheduler.max_num_seqs,
                         max_new_tokens_per_step(options.scheduler));
  Engine engine(std::make_unique<testing::ZeroLogitsBackend>(kv, capacity), nullptr, options);
  std::mt19937 random(1);
  for (int64_t r = 0; r < requests; ++r) {
    GenerationRequest request;
    request.prompt.resize(size_t(prompt_tokens));
    for (int32_t& token : request.prompt) token = int32_t(random() % 64);
    request.stop.max_tokens = output_tokens;
    request.stop.min_tokens = output_tokens;
    engine.submit(std::move(request));
  }
  ServedRun run;
  while (!engine.idle()) {
    for (const RequestOutput& output : engine.step()) run.finished += output.finished;
  }
  run.preemptions = engine.scheduler().preemptions();
  run.prompt_tokens_computed = engine.counters().prompt_tokens_computed;
  return run;
}

TEST(ServingPools, CachedPrefixesOfRunningRequestsDoNotForcePreemptions) {
  const int64_t requests = 8, prompt = 4096, output = 256;
  for (const bool prefix_caching : {false, true}) {
    SCOPED_TRACE(prefix_caching ? "prefix caching" : "no prefix caching");
    const ServedRun run = serve_all_at_once(prefix_caching, requests, prompt, output);
    EXPECT_EQ(run.finished, requests);
    EXPECT_EQ(run.preemptions, 0);
    EXPECT_EQ(run.prompt_tokens_computed, requests * prompt);
  }
}

}  // namespace
}  // namespace oscar
