#pragma once
// Continuous batching: every step, running sequences decode one token each, then prompt chunks
// fill the remaining token budget, first for sequences already prefilling, then for waiting ones
// in arrival order (FIFO: a waiting request is never overtaken). The budget holds every running
// sequence's decode (max_step_tokens >= max_num_seqs), so a long prompt never stalls them. A
// sequence is admitted only when its pages can be reserved; when the pool runs dry, the most
// recently admitted sequence is preempted (its pages freed, its tokens recomputed later) rather
// than failing a request.
#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

#include "backend/backend.h"
#include "engine/sequence.h"
#include "kvcache/page_pool.h"

namespace oscar {

// Prompt tokens of one sequence a step computes by default, per device. The CPU reference gains
// nothing from longer chunks; a GPU's matrix products need thousands of rows to keep its tensor
// cores busy. Tuned by measurement: `oscar bench prefill --chunk-tokens`. The GPU's is 66 x 128
// tokens: prefill attention runs a block per 128 query rows, 66 x H_q blocks a chunk, which fill
// whole waves of one block per multiprocessor on 132-multiprocessor GPUs for any even number of
// query heads (with 32 query heads, 8192 left half a wave idle at the end of every chunk).
inline constexpr int64_t kCpuPrefillChunkTokens = 512;
inline constexpr int64_t kGpuPrefillChunkTokens = 8448;
// The CPU's default step budget (below): four chunks.
inline constexpr int64_t kCpuMaxStepTokens = 2048;

int64_t default_prefill_chunk_tokens(DeviceKind device);
// Tokens of all sequences a step computes by default (vLLM's max_num_batched_tokens): a whole
// chunk beside a whole batch of decodes, so that running decodes never shrink a prompt's chunk
// and a long prompt never holds a decode back; on the CPU at least kCpuMaxStepTokens.
int64_t default_max_step_tokens(DeviceKind device, int64_t prefill_chunk_tokens,
                                int64_t max_num_seqs);

struct SchedulerOptions {
  int64_t max_num_seqs = 64;
  int64_t max_step_tokens = kCpuMaxStepTokens;  // decode tokens + prefill chunk tokens per step
  int64_t prefill_chunk_tokens = kCpuPrefillChunkTokens;  // prompt tokens of one sequence per step
};

// New tokens of all sequences one step computes at most: what a KV pool holds beyond each
// sequence's own pages (capacity_for_sequences, capacity_for_bytes take it).
inline int64_t max_new_tokens_per_step(const SchedulerOptions& options) {
  return std::min(options.max_step_tokens, options.max_num_seqs * options.prefill_chunk_tokens);
}

// How the scheduler reaches the prefix cache (all optional).
struct SchedulerHooks {
  std::function<void(Sequence&)> admit;       // before a waiting sequence's first reservation
  std::function<bool(KvPageCounts)> reclaim;  // free cached pages until `needed` are free
  std::function<void(Sequence&)> release;     // a sequence gave back its pages
};

struct ScheduledChunk {
  Sequence* sequence = nullptr;
  int64_t count = 0;  // tokens computed this step, starting at sequence->pages.num_tokens()
};

class Scheduler {
 public:
  // Throws Error when the budget cannot hold every running sequence's decode.
  Scheduler(SchedulerOptions options, const KvCacheConfig& kv, KvPagePools& pools,
            SchedulerHooks hooks = {});

  void add(Sequence* sequence);     // joins the waiting queue
  void remove(Sequence* sequence);  // finished or cancelled: pages released
  std::vector<ScheduledChunk> schedule();

  const std::deque<Sequence*>& waiting() const { return waiting_; }
  const std::vector<Sequence*>& running() const { return running_; }
  int64_t preemptions() const { return preemptions_; }

 private:
  bool reserve_or_preempt(Sequence* sequence, int64_t count, std::vector<ScheduledChunk>& plan,
                          int64_t& budget);
  bool reserve_for_admission(Sequence* sequence, int64_t budget, int64_t* count);
  bool reserve_or_reclaim(Sequence* sequence, int64_t count);
  void preempt(Sequence* victim);

  SchedulerOptions options_;
  const KvCacheConfig& kv_;
  KvPagePools& pools_;
  SchedulerHooks hooks_;
  std::deque<Sequence*> waiting_;
  std::vector<Sequence*> running_;  // in admission order
  int64_t preemptions_ = 0;
};

}  // namespace oscar
