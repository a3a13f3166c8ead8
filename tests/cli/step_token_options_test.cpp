// --prefill-chunk and --max-step-tokens (step_token_options.h): defaults per device, the flags
// taking precedence under their names and vLLM's, and errors that name the flag.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cli/step_token_options.h"
#include "util/error.h"

namespace oscar::cli {
namespace {

TEST(StepTokenOptions, DefaultsFollowTheDeviceAndFlagsWin) {
  const SchedulerOptions cpu = scheduler_options({}, DeviceKind::cpu, 64);
  EXPECT_EQ(cpu.prefill_chunk_tokens, 512);
  EXPECT_EQ(cpu.max_step_tokens, 2048);
  EXPECT_EQ(cpu.max_num_seqs, 64);
  const SchedulerOptions gpu = scheduler_options({}, DeviceKind::cuda, 64);
  EXPECT_EQ(gpu.prefill_chunk_tokens, kGpuPrefillChunkTokens);
  EXPECT_EQ(gpu.max_step_tokens, kGpuPrefillChunkTokens + 64);
  const SchedulerOptions chunk = scheduler_options({1024, std::nullopt}, DeviceKind::cuda, 8);
  EXPECT_EQ(chunk.prefill_chunk_tokens, 1024);
  EXPECT_EQ(chunk.max_step_tokens, 1024 + 8);
  const SchedulerOptions both = scheduler_options({1024, 300}, DeviceKind::cuda, 8);
  EXPECT_EQ(both.max_step_tokens, 300);
}

TEST(StepTokenOptions, FlagsParseUnderTheirNamesAndVllmsBudgetName) {
  auto parse = [](std::vector<std::string> arguments) {
    CLI::App app;
    StepTokenOptions options;
    add_step_token_options(app, options);
    std::reverse(arguments.begin(), arguments.end());  // CLI11 takes them last first
    app.parse(arguments);
    return options;
  };
  const StepTokenOptions ours = parse({"--prefill-chunk", "4096", "--max-step-tokens", "5000"});
  EXPECT_EQ(ours.prefill_chunk, 4096);
  EXPECT_EQ(ours.max_step_tokens, 5000);
  const StepTokenOptions vllm = parse({"--max-num-batched-tokens", "6000"});
  EXPECT_EQ(vllm.prefill_chunk, std::nullopt);
  EXPECT_EQ(vllm.max_step_tokens, 6000);
}

TEST(StepTokenOptions, ErrorsNameTheFlag) {
  auto message = [](const StepTokenOptions& options) {
    try {
      scheduler_options(options, DeviceKind::cuda, 64);
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message({0, std::nullopt}).find("--prefill-chunk"), std::string::npos);
  // Every running sequence decodes a token each step: the budget holds the whole batch.
  EXPECT_NE(message({std::nullopt, 63}).find("--max-step-tokens"), std::string::npos);
  EXPECT_EQ(message({std::nullopt, 64}), "accepted");
}

}  // namespace
}  // namespace oscar::cli
