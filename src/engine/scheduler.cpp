#include "engine/scheduler.h"

#include <algorithm>

namespace oscar {

Scheduler::Scheduler(SchedulerOptions options, const KvCacheConfig& kv, KvPagePools& pools,
                     std::function<void(Sequence&)> admit_hook)
    : options_(options), kv_(kv), pools_(pools), admit_hook_(std::move(admit_hook)) {}

void Scheduler::add(Sequence* sequence) {
  sequence->state = SequenceState::waiting;
  waiting_.push_back(sequence);
}

void Scheduler::remove(Sequence* sequence) {
  std::erase(waiting_, sequence);
  std::erase(running_, sequence);
  sequence->pages.release_all(pools_);
}

void Scheduler::preempt(Sequence* victim) {
  std::erase(running_, victim);
  victim->pages.release_all(pools_);
  victim->state = SequenceState::waiting;
  ++victim->preemptions;
  ++preemptions_;
  waiting_.push_front(victim);
}

// Reserves pages for `count` more tokens of a running sequence, preempting later-admitted
// sequences while the pool is dry. Returns false if `sequence` itself had to be preempted.
bool Scheduler::reserve_or_preempt(Sequence* sequence, int64_t count) {
  while (!sequence->pages.reserve(count, kv_, pools_)) {
    Sequence* victim = running_.back();
    preempt(victim);
    if (victim == sequence) return false;
  }
  return true;
}

std::vector<ScheduledChunk> Scheduler::schedule() {
  std::vector<ScheduledChunk> plan;
  int64_t budget = options_.max_step_tokens;
  // 1. Decode: every running sequence whose prompt is done needs one token.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence* sequence = running_[i];
    if (sequence->uncomputed() != 1) {
      ++i;
      continue;
    }
    if (!reserve_or_preempt(sequence, 1)) continue;  // it left running_; i now names the next
    plan.push_back({sequence, 1});
    --budget;
    ++i;
  }
  // 2. Prefill chunks of running sequences (admitted earlier, prompt not yet done).
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence* sequence = running_[i];
    const bool planned = std::any_of(plan.begin(), plan.end(),
                                     [&](const ScheduledChunk& c) { return c.sequence == sequence; });
    if (planned || sequence->uncomputed() <= 1) {
      ++i;
      continue;
    }
    const int64_t count =
        std::min({sequence->uncomputed(), budget, options_.prefill_chunk_tokens});
    if (!reserve_or_preempt(sequence, count)) continue;
    plan.push_back({sequence, count});
    budget -= count;
    ++i;
  }
  // 3. Admit waiting sequences in arrival order while pages and slots last.
  while (!waiting_.empty() && budget > 0 && int64_t(running_.size()) < options_.max_num_seqs) {
    Sequence* sequence = waiting_.front();
    if (admit_hook_ && sequence->pages.num_tokens() == 0) admit_hook_(*sequence);
    const int64_t count =
        std::min({sequence->uncomputed(), budget, options_.prefill_chunk_tokens});
    if (!sequence->pages.reserve(count, kv_, pools_)) break;  // FIFO: wait for pages
    waiting_.pop_front();
    sequence->state = SequenceState::running;
    running_.push_back(sequence);
    plan.push_back({sequence, count});
    budget -= count;
  }
  return plan;
}

}  // namespace oscar
