#pragma once
// A step as rank 0 sends it to the other tensor-parallel ranks (parallel/rank_messages.h), and
// running such a plan on a follower's backend: the follower rebuilds each sequence's page table
// from the plan (rank 0's scheduler owns the pools), so every rank writes the same pages.
#include <cstdint>
#include <span>

#include "backend/backend.h"
#include "parallel/rank_messages.h"

namespace oscar {

StepPlan plan_of_steps(std::span<const SequenceStep> steps, int64_t step_index);

void run_planned_step(Backend& backend, const StepPlan& plan, StepLogits& logits);

}  // namespace oscar
