#include "cli/bench_prefill_schedule.h"

#include "util/error.h"

namespace oscar::cli {

std::vector<int64_t> prefill_lone_prompt(std::span<const int32_t> prompt,
                                         const SchedulerOptions& options, const KvCacheConfig& kv,
                                         KvPagePools& pools,
                                         const std::function<void(const SequenceStep&)>& forward) {
  GenerationRequest request;
  request.prompt.assign(prompt.begin(), prompt.end());
  request.stop.max_tokens = 1;
  Sequence sequence(1, std::move(request), nullptr);
  Scheduler scheduler(options, kv, pools);
  scheduler.add(&sequence);
  // The sequence's pages go back to the pools however the prefill ends.
  const struct Removed {
    Scheduler& scheduler;
    Sequence& sequence;
    ~Removed() { scheduler.remove(&sequence); }
  } removed{scheduler, sequence};
  std::vector<int64_t> chunks;
  while (sequence.uncomputed() > 0) {
    const std::vector<ScheduledChunk> plan = scheduler.schedule();
    require(plan.size() == 1,
            "bench prefill: the KV pools cannot hold a {}-token prompt ({} tokens prefilled)",
            prompt.size(), sequence.pages.num_tokens());
    const int64_t start = sequence.pages.num_tokens(), count = plan.front().count;
    forward(
        {std::span(sequence.tokens).subspan(size_t(start), size_t(count)), &sequence.pages, false});
    sequence.pages.commit(count, kv, pools);
    chunks.push_back(count);
  }
  return chunks;
}

}  // namespace oscar::cli
