#pragma once
// --prefill-chunk and --max-step-tokens, for the commands that run the engine (generate, eval ppl
// and niah, serve, bench serve): the prompt tokens of one sequence, and the tokens of all, that a
// step computes. Their defaults depend on the device (engine/scheduler.h).
#include <cstdint>
#include <optional>

#include <CLI/CLI.hpp>

#include "backend/backend.h"
#include "engine/scheduler.h"

namespace oscar::cli {

struct StepTokenOptions {
  std::optional<int64_t> prefill_chunk;
  std::optional<int64_t> max_step_tokens;
};

void add_step_token_options(CLI::App& command, StepTokenOptions& options);

// The scheduler's options for up to `max_num_seqs` sequences at once on `device`; throws Error
// naming the flag at fault.
SchedulerOptions scheduler_options(const StepTokenOptions& options, DeviceKind device,
                                   int64_t max_num_seqs);

}  // namespace oscar::cli
