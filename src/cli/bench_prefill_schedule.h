#pragma once
// How `oscar bench prefill` feeds a prompt to the backend: exactly as the engine runs a lone
// request. The engine's Scheduler plans each step (a chunk of the prompt within the step budget)
// and reserves its pages; `forward` runs the step; its pages are committed after it, as
// Engine::step does. No token is sampled.
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "engine/scheduler.h"

namespace oscar::cli {

// Prefills `prompt` through `forward`, called once per step with the step's one chunk, and returns
// the chunks' lengths. Every page goes back to `pools` at the end. Throws when the pools cannot
// hold the prompt.
std::vector<int64_t> prefill_lone_prompt(std::span<const int32_t> prompt,
                                         const SchedulerOptions& options, const KvCacheConfig& kv,
                                         KvPagePools& pools,
                                         const std::function<void(const SequenceStep&)>& forward);

}  // namespace oscar::cli
