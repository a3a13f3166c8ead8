// `oscar generate` as a user runs it: the exact greedy continuation, and one-line errors with a
// non-zero exit for bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "oscar_command.h"
#include "support/test_paths.h"

namespace oscar {
namespace {

using testing::CommandResult;
using testing::run_oscar;

TEST(GenerateCommand, GreedyContinuationMatchesTransformers) {
  // transformers' greedy continuation of this prompt (models/testbed/reference, case 0).
  const CommandResult r =
      run_oscar("generate --prompt \"The quick brown fox\" --max-tokens 16 --temperature 0");
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.stdout_text, "es, and the\n      sixth of the fifth of the\n");
  EXPECT_NE(r.stderr_text.find("prompt 6 tokens, generated 16 tokens"), std::string::npos)
      << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("KiB/token"), std::string::npos);
}

TEST(GenerateCommand, GreedyIsDeterministicAcrossKvFormats) {
  const std::string args =
      "generate --prompt \"int main(void) {\" --max-tokens 24 --temperature 0 ";
  const CommandResult first = run_oscar(
      args + "--kv-cache-dtype int2 --kv-method quarot --kv-sink-tokens 4 --kv-recent-tokens 8");
  const CommandResult second =
      run_oscar(args +
                "--kv-cache-dtype int2 --kv-method quarot --kv-sink-tokens 4 --kv-recent-tokens 8 "
                "--prefill-chunk 3");
  ASSERT_EQ(first.exit_code, 0) << first.stderr_text;
  EXPECT_EQ(first.stdout_text, second.stdout_text);
  EXPECT_NE(first.stderr_text.find("int2 quarot"), std::string::npos) << first.stderr_text;
}

void expect_one_line_error(const CommandResult& r, const std::string& fragment) {
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(r.stdout_text.empty()) << r.stdout_text;
  EXPECT_NE(r.stderr_text.find(fragment), std::string::npos) << r.stderr_text;
  EXPECT_EQ(std::count(r.stderr_text.begin(), r.stderr_text.end(), '\n'), 1) << r.stderr_text;
}

TEST(GenerateCommand, CorruptedModelDirectoryGivesAClearError) {
  const std::string truncated = testing::copy_testbed_model("truncated");
  std::filesystem::resize_file(truncated + "/model.safetensors", 1 << 20);
  expect_one_line_error(run_oscar("generate --model " + truncated + " --prompt hi"),
                        "model.safetensors");

  const std::string no_tokenizer = testing::copy_testbed_model("no-tokenizer");
  std::filesystem::remove(no_tokenizer + "/tokenizer.json");
  expect_one_line_error(run_oscar("generate --model " + no_tokenizer + " --prompt hi"),
                        "tokenizer.json");

  const std::string wrong_arch = testing::copy_testbed_model("wrong-arch");
  {
    std::ifstream in(wrong_arch + "/config.json");
    std::string text((std::istreambuf_iterator<char>(in)), {});
    text.replace(text.find("Qwen3ForCausalLM"), 16, "Gemma2ForCausalLM");
    std::ofstream(wrong_arch + "/config.json") << text;
  }
  expect_one_line_error(run_oscar("generate --model " + wrong_arch + " --prompt hi"),
                        "unsupported architecture");
  expect_one_line_error(run_oscar("generate --model /nonexistent --prompt hi"), "/nonexistent");
}

TEST(GenerateCommand, BadPromptsAndFlags) {
  const std::string dir = testing::make_temp_dir("prompts");
  std::ofstream(dir + "/bad.txt") << "abc\xff\xfe";
  expect_one_line_error(run_oscar("generate --prompt-file " + dir + "/bad.txt"), "invalid UTF-8");
  std::ofstream long_prompt(dir + "/long.txt");
  for (int i = 0; i < 9000; ++i) long_prompt << "word ";
  long_prompt.close();
  expect_one_line_error(run_oscar("generate --prompt-file " + dir + "/long.txt"), "context");
  expect_one_line_error(run_oscar("generate --prompt x --kv-cache-dtype int3"), "--kv-cache-dtype");
  // A model without rotations (the testbed's may have been calibrated in the source tree).
  const std::string uncalibrated = testing::copy_testbed_model("uncalibrated");
  expect_one_line_error(
      run_oscar("generate --model " + uncalibrated + " --prompt x --kv-cache-dtype int2"),
      "--kv-rotations");
  expect_one_line_error(run_oscar("generate --prompt x --temperature -1"), "temperature");
}

}  // namespace
}  // namespace oscar
