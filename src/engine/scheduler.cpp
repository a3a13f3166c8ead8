#include "engine/scheduler.h"

#include <algorithm>

#include "util/error.h"

namespace oscar {

int64_t default_prefill_chunk_tokens(DeviceKind device) {
  return device == DeviceKind::cuda ? kGpuPrefillChunkTokens : kCpuPrefillChunkTokens;
}

int64_t default_max_step_tokens(DeviceKind device, int64_t prefill_chunk_tokens,
                                int64_t max_num_seqs) {
  const int64_t chunk_beside_decodes = prefill_chunk_tokens + max_num_seqs;
  return device == DeviceKind::cuda ? chunk_beside_decodes
                                    : std::max(kCpuMaxStepTokens, chunk_beside_decodes);
}

Scheduler::Scheduler(SchedulerOptions options, const KvCacheConfig& kv, KvPagePools& pools,
                     SchedulerHooks hooks)
    : options_(options), kv_(kv), pools_(pools), hooks_(std::move(hooks)) {
  require(options_.max_num_seqs >= 1 && options_.prefill_chunk_tokens >= 1,
          "scheduler: max_num_seqs ({}) and prefill_chunk_tokens ({}) must be at least 1",
          options_.max_num_seqs, options_.prefill_chunk_tokens);
  // Decodes go first, one token each: a smaller budget would leave the last-admitted sequences
  // without a token step after step.
  require(
      options_.max_step_tokens >= options_.max_num_seqs,
      "scheduler: max_step_tokens ({}) must be at least max_num_seqs ({}), so that every running "
      "sequence decodes at each step",
      options_.max_step_tokens, options_.max_num_seqs);
}

void Scheduler::add(Sequence* sequence) {
  sequence->state = SequenceState::waiting;
  waiting_.push_back(sequence);
}

void Scheduler::remove(Sequence* sequence) {
  std::erase(waiting_, sequence);
  std::erase(running_, sequence);
  sequence->pages.release_all(pools_);
  if (hooks_.release) hooks_.release(*sequence);
}

void Scheduler::preempt(Sequence* victim) {
  std::erase(running_, victim);
  victim->pages.release_all(pools_);
  if (hooks_.release) hooks_.release(*victim);
  victim->state = SequenceState::waiting;
  ++victim->preemptions;
  ++preemptions_;
  waiting_.push_front(victim);
}

// Reserves pages, first evicting cached prefixes nothing uses when the pools are dry.
bool Scheduler::reserve_or_reclaim(Sequence* sequence, int64_t count) {
  if (sequence->pages.reserve(count, kv_, pools_)) return true;
  if (!hooks_.reclaim || !hooks_.reclaim(sequence->pages.pages_needed(count, kv_))) return false;
  return sequence->pages.reserve(count, kv_, pools_);
}

// Reserves pages for `count` more tokens of a running sequence, preempting later-admitted
// sequences while the pool is dry. Returns false if `sequence` itself had to be preempted.
// A victim already planned this step leaves the plan with its pages.
bool Scheduler::reserve_or_preempt(Sequence* sequence, int64_t count,
                                   std::vector<ScheduledChunk>& plan, int64_t& budget) {
  while (!reserve_or_reclaim(sequence, count)) {
    Sequence* victim = running_.back();
    preempt(victim);
    for (auto it = plan.begin(); it != plan.end();) {
      if (it->sequence != victim) {
        ++it;
        continue;
      }
      budget += it->count;
      it = plan.erase(it);
    }
    if (victim == sequence) return false;
  }
  return true;
}

// Admission reserves for the first chunk. A cached prefix attached to the sequence pins pages that
// eviction cannot free; if they are what stands in the way, the sequence gives them back and tries
// cold, so a waiting sequence never holds pages it cannot use.
bool Scheduler::reserve_for_admission(Sequence* sequence, int64_t budget, int64_t* count) {
  if (hooks_.admit && sequence->pages.num_tokens() == 0) hooks_.admit(*sequence);
  *count = std::min({sequence->uncomputed(), budget, options_.prefill_chunk_tokens});
  if (reserve_or_reclaim(sequence, *count)) return true;
  if (sequence->pages.num_tokens() == 0) return false;
  sequence->pages.release_all(pools_);
  if (hooks_.release) hooks_.release(*sequence);
  *count = std::min({sequence->uncomputed(), budget, options_.prefill_chunk_tokens});
  return reserve_or_reclaim(sequence, *count);
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
    if (!reserve_or_preempt(sequence, 1, plan, budget))
      continue;  // it left running_; i now names the next
    plan.push_back({sequence, 1});
    --budget;
    ++i;
  }
  // 2. Prefill chunks of running sequences (admitted earlier, prompt not yet done).
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence* sequence = running_[i];
    const bool planned = std::any_of(
        plan.begin(), plan.end(), [&](const ScheduledChunk& c) { return c.sequence == sequence; });
    if (planned || sequence->uncomputed() <= 1) {
      ++i;
      continue;
    }
    const int64_t count = std::min({sequence->uncomputed(), budget, options_.prefill_chunk_tokens});
    if (!reserve_or_preempt(sequence, count, plan, budget)) continue;
    plan.push_back({sequence, count});
    budget -= count;
    ++i;
  }
  // 3. Admit waiting sequences in arrival order while pages and slots last.
  while (!waiting_.empty() && budget > 0 && int64_t(running_.size()) < options_.max_num_seqs) {
    Sequence* sequence = waiting_.front();
    int64_t count = 0;
    if (!reserve_for_admission(sequence, budget, &count)) break;  // FIFO: wait for pages
    waiting_.pop_front();
    sequence->state = SequenceState::running;
    running_.push_back(sequence);
    plan.push_back({sequence, count});
    budget -= count;
  }
  return plan;
}

}  // namespace oscar
