#include "backend/planned_step.h"

#include "util/error.h"

namespace oscar {

StepPlan plan_of_steps(std::span<const SequenceStep> steps, int64_t step_index) {
  StepPlan plan;
  plan.step_index = step_index;
  for (const SequenceStep& step : steps) {
    require(step.kv != nullptr, "step {}: a sequence without pages", step_index);
    PlannedSequence sequence;
    sequence.tokens.assign(step.tokens.begin(), step.tokens.end());
    sequence.pages = step.kv->pages();
    sequence.cached_tokens = step.kv->num_tokens();
    sequence.full_precision_until = step.kv->full_precision_until();
    sequence.all_logits = step.all_logits;
    plan.sequences.push_back(std::move(sequence));
  }
  return plan;
}

void run_planned_step(Backend& backend, const StepPlan& plan, StepLogits& logits) {
  std::vector<SequencePages> pages(plan.sequences.size());
  std::vector<SequenceStep> steps(plan.sequences.size());
  for (size_t i = 0; i < plan.sequences.size(); ++i) {
    const PlannedSequence& sequence = plan.sequences[i];
    require(!sequence.tokens.empty(), "step {}: sequence {} has no tokens", plan.step_index, i);
    pages[i] = SequencePages(sequence.full_precision_until);
    pages[i].attach_prefix(sequence.pages, sequence.cached_tokens);
    steps[i] = {sequence.tokens, &pages[i], sequence.all_logits};
  }
  backend.forward(steps, logits, nullptr);
}

}  // namespace oscar
