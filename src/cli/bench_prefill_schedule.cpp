#include "cli/bench_prefill_schedule.h"

#include "cli/bench_gpu_common.h"
#include "kvcache/page_layout.h"
#include "util/error.h"

namespace oscar::cli {

KvPageCounts prefill_pool_capacity(const KvCacheConfig& kv, int64_t prompt_tokens,
                                   int64_t chunk_tokens, const DecodeRows& decodes) {
  KvPageCounts pages = capacity_for_sequences(kv, prompt_tokens, 1, chunk_tokens);
  if (decodes.batch <= 0) return pages;
  // One token a step: the prompt's chunks, and a margin for the steps' page boundaries.
  const int64_t steps = (prompt_tokens + chunk_tokens - 1) / chunk_tokens;
  const KvPageCounts rows = bench_pool_capacity(kv, decodes.context + steps + 4, decodes.batch);
  pages.full += rows.full;
  pages.quantized += rows.quantized;
  pages.band += rows.band;
  return pages;
}

std::vector<int64_t> prefill_beside_decodes(
    std::span<const int32_t> prompt, const SchedulerOptions& options, const KvCacheConfig& kv,
    KvPagePools& pools, const DecodeRows& decodes,
    const std::function<void(std::span<const SequenceStep>)>& forward) {
  require(decodes.batch >= 0 && (decodes.batch == 0 || decodes.context >= 1),
          "bench prefill: {} decode rows at context {}", decodes.batch, decodes.context);
  GenerationRequest request;
  request.prompt.assign(prompt.begin(), prompt.end());
  request.stop.max_tokens = 1;
  Sequence sequence(1, std::move(request), nullptr);
  Scheduler scheduler(options, kv, pools);
  scheduler.add(&sequence);
  // Every page goes back to the pools however the prefill ends.
  std::vector<SequencePages> rows;
  const struct Removed {
    Scheduler& scheduler;
    Sequence& sequence;
    std::vector<SequencePages>& rows;
    KvPagePools& pools;
    ~Removed() {
      scheduler.remove(&sequence);
      for (SequencePages& row : rows) row.release_all(pools);
    }
  } removed{scheduler, sequence, rows, pools};
  rows = fill_sequences(kv, pools, decodes.context, decodes.batch);
  const int32_t token = kDecodeRowToken;
  std::vector<SequenceStep> steps;
  std::vector<int64_t> chunks;
  while (sequence.uncomputed() > 0) {
    steps.clear();
    for (SequencePages& row : rows) {
      require(row.reserve(1, kv, pools),
              "bench prefill: the KV pools cannot hold {} decode rows of {} tokens", decodes.batch,
              row.num_tokens() + 1);
      steps.push_back({std::span(&token, 1), &row, false});
    }
    const std::vector<ScheduledChunk> plan = scheduler.schedule();
    require(plan.size() == 1,
            "bench prefill: the KV pools cannot hold a {}-token prompt ({} tokens prefilled)",
            prompt.size(), sequence.pages.num_tokens());
    const int64_t start = sequence.pages.num_tokens(), count = plan.front().count;
    steps.push_back(
        {std::span(sequence.tokens).subspan(size_t(start), size_t(count)), &sequence.pages, false});
    forward(steps);
    for (SequencePages& row : rows) row.commit(1, kv, pools);
    sequence.pages.commit(count, kv, pools);
    chunks.push_back(count);
  }
  return chunks;
}

std::vector<int64_t> prefill_lone_prompt(std::span<const int32_t> prompt,
                                         const SchedulerOptions& options, const KvCacheConfig& kv,
                                         KvPagePools& pools,
                                         const std::function<void(const SequenceStep&)>& forward) {
  return prefill_beside_decodes(
      prompt, options, kv, pools, DecodeRows{},
      [&](std::span<const SequenceStep> steps) { forward(steps.back()); });
}

}  // namespace oscar::cli
