#include "cli/step_token_options.h"

#include <fmt/format.h>

#include "util/error.h"

namespace oscar::cli {

void add_step_token_options(CLI::App& command, StepTokenOptions& o) {
  command.add_option(
      "--prefill-chunk", o.prefill_chunk,
      fmt::format("prompt tokens of one sequence per step (default {} on the CPU, {} on a GPU)",
                  kCpuPrefillChunkTokens, kGpuPrefillChunkTokens));
  // vLLM's name for the same budget is accepted too.
  command.add_option(
      "--max-step-tokens,--max-num-batched-tokens", o.max_step_tokens,
      fmt::format("tokens of all sequences per step, decodes first (default: a chunk beside a "
                  "full batch of decodes; on the CPU at least {})",
                  kCpuMaxStepTokens));
}

SchedulerOptions scheduler_options(const StepTokenOptions& o, DeviceKind device,
                                   int64_t max_num_seqs) {
  SchedulerOptions scheduler;
  scheduler.max_num_seqs = max_num_seqs;
  scheduler.prefill_chunk_tokens = o.prefill_chunk.value_or(default_prefill_chunk_tokens(device));
  require(scheduler.prefill_chunk_tokens >= 1, "--prefill-chunk must be at least 1, got {}",
          scheduler.prefill_chunk_tokens);
  scheduler.max_step_tokens = o.max_step_tokens.value_or(
      default_max_step_tokens(device, scheduler.prefill_chunk_tokens, max_num_seqs));
  require(scheduler.max_step_tokens >= max_num_seqs,
          "--max-step-tokens ({}) must be at least the number of sequences that may run at once "
          "({}): each decodes a token every step",
          scheduler.max_step_tokens, max_num_seqs);
  return scheduler;
}

}  // namespace oscar::cli
