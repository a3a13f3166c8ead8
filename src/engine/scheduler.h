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

// How the scheduler reaches the prefix cache (all optional).
struct SchedulerHooks {
  std::function<void(Sequence&)> admit;          // before a waiting sequence's first reservation
  std::function<bool(KvPageCounts)> reclaim;     // free cached pages until `needed` are free
  std::function<void(Sequence&)> release;        // a sequence gave back its pages
};

struct ScheduledChunk {
  Sequence* sequence = nullptr;
  int64_t count = 0;  // tokens computed this step, starting at sequence->pages.num_tokens()
};

class Scheduler {
 public:
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
