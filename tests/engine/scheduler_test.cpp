// The scheduler's step budget: every running sequence decodes at each step, and prompt chunks
// take only what the decodes leave, so a long prompt never stalls them; the defaults per device.
#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <vector>

#include "engine/scheduler.h"
#include "util/error.h"

namespace oscar {
namespace {

std::unique_ptr<Sequence> make_sequence(RequestId id, int64_t prompt_tokens) {
  GenerationRequest request;
  request.prompt.assign(size_t(prompt_tokens), 7);
  request.stop.max_tokens = 1000000;
  return std::make_unique<Sequence>(id, std::move(request), nullptr);
}

// What Engine::step does after the backend ran a plan: the pages advance, and each sequence
// whose prompt is done draws a token.
void finish_step(const std::vector<ScheduledChunk>& plan, const KvCacheConfig& kv,
                 KvPagePools& pools) {
  for (const ScheduledChunk& chunk : plan) {
    chunk.sequence->pages.commit(chunk.count, kv, pools);
    if (chunk.sequence->uncomputed() == 0) chunk.sequence->tokens.push_back(7);
  }
}

int64_t count_of(const std::vector<ScheduledChunk>& plan, const Sequence* sequence) {
  for (const ScheduledChunk& chunk : plan) {
    if (chunk.sequence == sequence) return chunk.count;
  }
  return 0;
}

TEST(Scheduler, DecodesComeFirstAndALongPromptTakesTheRestOfTheBudget) {
  const KvCacheConfig kv;  // bf16
  for (const int64_t budget : {int64_t(8192 + 8), int64_t(1000), int64_t(9)}) {
    SCOPED_TRACE("max_step_tokens " + std::to_string(budget));
    KvPagePools pools(KvPageCounts{4096, 0, 0});
    SchedulerOptions options;
    options.max_num_seqs = 8;
    options.prefill_chunk_tokens = 8192;
    options.max_step_tokens = budget;
    Scheduler scheduler(options, kv, pools);
    std::vector<std::unique_ptr<Sequence>> decoding;
    for (RequestId id = 1; id <= 7; ++id) {
      decoding.push_back(make_sequence(id, 1));
      scheduler.add(decoding.back().get());
    }
    finish_step(scheduler.schedule(), kv, pools);  // the one-token prompts, all admitted
    const auto long_prompt = make_sequence(100, 40000);
    scheduler.add(long_prompt.get());
    int64_t prefilled = 0;
    for (int step = 0; long_prompt->uncomputed() > 1 && step < 100; ++step) {
      const std::vector<ScheduledChunk> plan = scheduler.schedule();
      for (const auto& sequence : decoding)
        ASSERT_EQ(count_of(plan, sequence.get()), 1) << "step " << step;
      const int64_t chunk = count_of(plan, long_prompt.get());
      const int64_t total =
          std::accumulate(plan.begin(), plan.end(), int64_t(0),
                          [](int64_t sum, const ScheduledChunk& c) { return sum + c.count; });
      EXPECT_LE(total, budget) << "step " << step;
      // The whole remaining budget, up to a chunk, until the prompt's last tokens.
      EXPECT_EQ(chunk,
                std::min({budget - 7, options.prefill_chunk_tokens, long_prompt->uncomputed()}))
          << "step " << step;
      prefilled += chunk;
      finish_step(plan, kv, pools);
    }
    // With two tokens a step (budget 9) the prompt is not done in 100 steps, and it still moves.
    EXPECT_EQ(prefilled, budget >= 1000 ? 40000 : 200);
  }
}

TEST(Scheduler, ABudgetBelowTheBatchIsRefused) {
  const KvCacheConfig kv;
  KvPagePools pools(KvPageCounts{64, 0, 0});
  SchedulerOptions options;
  options.max_num_seqs = 16;
  options.max_step_tokens = 15;
  EXPECT_THROW(Scheduler(options, kv, pools), Error);
  options.max_step_tokens = 16;
  EXPECT_NO_THROW(Scheduler(options, kv, pools));
}

TEST(Scheduler, DefaultsFollowTheDevice) {
  EXPECT_EQ(default_prefill_chunk_tokens(DeviceKind::cpu), 512);
  EXPECT_EQ(default_prefill_chunk_tokens(DeviceKind::cuda), kGpuPrefillChunkTokens);
  EXPECT_GE(kGpuPrefillChunkTokens, 4096);
  // Whole pages, and whole waves of 128-row attention blocks on 132 multiprocessors for every
  // even number of query heads (chunk x H_q / 128 blocks).
  for (int64_t query_heads = 2; query_heads <= 128; query_heads += 2) {
    EXPECT_EQ(kGpuPrefillChunkTokens * query_heads / 128 % 132, 0) << query_heads;
  }
  EXPECT_EQ(kGpuPrefillChunkTokens % 64, 0);
  // A GPU step holds a whole chunk beside a whole batch of decodes.
  EXPECT_EQ(default_max_step_tokens(DeviceKind::cuda, 8192, 64), 8192 + 64);
  // The CPU keeps its budget unless a chunk and the batch need more.
  EXPECT_EQ(default_max_step_tokens(DeviceKind::cpu, 512, 64), kCpuMaxStepTokens);
  EXPECT_EQ(default_max_step_tokens(DeviceKind::cpu, 4096, 64), 4096 + 64);
  SchedulerOptions options;
  options.max_num_seqs = 64;
  options.prefill_chunk_tokens = 8192;
  options.max_step_tokens = 8192 + 64;
  EXPECT_EQ(max_new_tokens_per_step(options), 8192 + 64);
  options.max_num_seqs = 1;
  EXPECT_EQ(max_new_tokens_per_step(options), 8192);
}

}  // namespace
}  // namespace oscar
