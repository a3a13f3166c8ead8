#pragma once
// How `oscar bench prefill` feeds a prompt to the backend: exactly as the engine runs a lone
// request. The engine's Scheduler plans each step (a chunk of the prompt within the step budget)
// and reserves its pages; `forward` runs the step; its pages are committed after it, as
// Engine::step does. No token is sampled.
//
// With decode rows (--decode-batch), every step also carries one new token of each of `batch`
// other sequences that already hold `context` tokens, ahead of the chunk, as the serving
// scheduler runs its decodes beside a prefill chunk (Scheduler::schedule); each grows by one token
// a step. Their pages are only reserved here: what they hold is whatever the backend's pages hold
// (the benchmark fills them with noise, fill_kv_cache_with_noise).
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "engine/scheduler.h"

namespace oscar::cli {

struct DecodeRows {
  int64_t batch = 0;    // sequences decoding beside the prompt (0: the prompt alone)
  int64_t context = 0;  // tokens each holds before the prompt's first step
};

// The token each decode row adds (its value does not change the work).
inline constexpr int32_t kDecodeRowToken = 7;

// Page pool sizes for one prompt of `prompt_tokens` in chunks of `chunk_tokens` and the decode
// rows beside it, grown by one token in each of the prompt's steps.
KvPageCounts prefill_pool_capacity(const KvCacheConfig& kv, int64_t prompt_tokens,
                                   int64_t chunk_tokens, const DecodeRows& decodes);

// Prefills `prompt` through `forward`, called once per step with the decode rows' steps (in
// their order, first) and then the step's one chunk, and returns the chunks' lengths. Every page
// goes back to `pools` at the end. Throws when the pools cannot hold the prompt and the rows.
std::vector<int64_t> prefill_beside_decodes(
    std::span<const int32_t> prompt, const SchedulerOptions& options, const KvCacheConfig& kv,
    KvPagePools& pools, const DecodeRows& decodes,
    const std::function<void(std::span<const SequenceStep>)>& forward);

// The same without decode rows, `forward` called with the chunk's step alone.
std::vector<int64_t> prefill_lone_prompt(std::span<const int32_t> prompt,
                                         const SchedulerOptions& options, const KvCacheConfig& kv,
                                         KvPagePools& pools,
                                         const std::function<void(const SequenceStep&)>& forward);

}  // namespace oscar::cli
