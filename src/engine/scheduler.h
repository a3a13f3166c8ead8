#pragma once
// Continuous batching: every step, running sequences decode one token each, then prompt chunks
// fill the remaining token budget, first for sequences already prefilling, then for waiting ones
// in arrival order (FIFO: a waiting request is never overtaken). A sequence is admitted only
// when its pages can be reserved; when the pool runs dry, the most recently admitted sequence is
// preempted (its pages freed, its tokens recomputed later) rather than failing a request.
#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

#include "engine/sequence.h"
#include "kvcache/page_pool.h"

namespace oscar {

struct SchedulerOptions {
  int64_t max_num_seqs = 64;
  int64_t max_step_tokens = 2048;     // decode tokens + prefill chunk tokens per step
  int64_t prefill_chunk_tokens = 512; // at most this many prompt tokens of one sequence per step
};

struct ScheduledChunk {
  Sequence* sequence = nullptr;
  int64_t count = 0;  // tokens computed this step, starting at sequence->pages.num_tokens()
};

class Scheduler {
 public:
  // `admit_hook` runs when a waiting sequence is about to be admitted (prefix-cache lookup).
  Scheduler(SchedulerOptions options, const KvCacheConfig& kv, KvPagePools& pools,
            std::function<void(Sequence&)> admit_hook = {});

  void add(Sequence* sequence);     // joins the waiting queue
  void remove(Sequence* sequence);  // finished or cancelled: pages released
  std::vector<ScheduledChunk> schedule();

  const std::deque<Sequence*>& waiting() const { return waiting_; }
  const std::vector<Sequence*>& running() const { return running_; }
  int64_t preemptions() const { return preemptions_; }

 private:
  bool reserve_or_preempt(Sequence* sequence, int64_t count);
  void preempt(Sequence* victim);

  SchedulerOptions options_;
  const KvCacheConfig& kv_;
  KvPagePools& pools_;
  std::function<void(Sequence&)> admit_hook_;
  std::deque<Sequence*> waiting_;
  std::vector<Sequence*> running_;  // in admission order
  int64_t preemptions_ = 0;
};

}  // namespace oscar
