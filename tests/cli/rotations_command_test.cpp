// OSCAR as a quantized cache's default method, as a new user meets it: a model without rotations is
// refused with the exact command that calibrates it; that command, run as printed, writes them
// beside the model, where every command then finds them; a rotations file that would be ignored,
// or that belongs to another model, is refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "cli/bench_gpu_common.h"
#include "model/model_weights.h"
#include "oscar_command.h"
#include "quant/kv_rotations.h"
#include "support/test_paths.h"
#include "util/file_io.h"

namespace oscar {
namespace {

using testing::CommandResult;
using testing::run_oscar;

// What follows "make them with: " on the refusal's line.
std::string printed_calibrate_command(const std::string& stderr_text) {
  std::smatch m;
  if (!std::regex_search(stderr_text, m, std::regex("make them with: ([^\n]*)"))) return {};
  return m[1];
}

// Rotations recorded as calibrated on the model in `model_dir` (the GPU benchmarks' synthetic
// ones): they load like `oscar calibrate`'s file, without running a calibration.
std::string rotations_recorded_for(const std::string& model_dir) {
  const std::string written = cli::write_synthetic_oscar_rotations(load_model(model_dir));
  const std::string path = testing::make_temp_dir("recorded-rotations") + "/rotations.safetensors";
  std::filesystem::copy_file(written, path);
  std::filesystem::remove(written);
  return path;
}

TEST(RotationsCommand, Int2IsOscarAndTheRefusalPrintsTheCommandThatFixesIt) {
  const std::string model = testing::copy_testbed_model("uncalibrated");
  const std::string generate =
      "generate --model " + model + " --prompt hi --max-tokens 2 --kv-cache-dtype int2";
  const CommandResult refused = run_oscar(generate);
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.stderr_text.find(model + "/" + kRotationsFileName + " is absent"),
            std::string::npos)
      << refused.stderr_text;
  const std::string command = printed_calibrate_command(refused.stderr_text);
  EXPECT_EQ(command, testing::oscar_program() + " calibrate --model " + model)
      << refused.stderr_text;

  // Run as printed (with a small calibration, to keep the test short), it writes the file where the
  // commands look.
  const CommandResult calibrated = testing::run_command(
      command + " --tokens 256 --seq-len 128 --held-out-tokens 64 --device cpu");
  ASSERT_EQ(calibrated.exit_code, 0) << calibrated.stderr_text;
  ASSERT_TRUE(file_exists(model + "/" + kRotationsFileName)) << calibrated.stdout_text;
  EXPECT_NE(calibrated.stdout_text.find("wrote " + model + "/" + kRotationsFileName),
            std::string::npos)
      << calibrated.stdout_text;

  const CommandResult generated = run_oscar(generate);
  ASSERT_EQ(generated.exit_code, 0) << generated.stderr_text;
  EXPECT_NE(generated.stderr_text.find("int2 oscar"), std::string::npos) << generated.stderr_text;
  const CommandResult int4 =
      run_oscar("generate --model " + model + " --prompt hi --max-tokens 2 --kv-cache-dtype int4");
  ASSERT_EQ(int4.exit_code, 0) << int4.stderr_text;
  EXPECT_NE(int4.stderr_text.find("int4 oscar"), std::string::npos) << int4.stderr_text;
  const CommandResult eval =
      run_oscar("eval ppl --model " + model +
                " --windows 1 --context 64 --json "
                "--kv-cache-dtype int2 --kv-sink-tokens 4 --kv-recent-tokens 8");
  ASSERT_EQ(eval.exit_code, 0) << eval.stderr_text;
  EXPECT_NE(eval.stdout_text.find("int2 oscar"), std::string::npos) << eval.stdout_text;
  testing::BackgroundOscar serve("serve --model " + model +
                                 " --device cpu --port 0 --kv-pool-gb 0.02 --kv-cache-dtype int2");
  const std::string line = serve.wait_for_stderr_line("serving", std::chrono::seconds(60));
  EXPECT_NE(line.find("KV int2 oscar"), std::string::npos) << serve.stderr_text();
  EXPECT_EQ(serve.terminate(std::chrono::seconds(30)), 0) << serve.stderr_text();
  // The bf16 cache stays the default, and reads no rotations.
  const CommandResult bf16 = run_oscar("generate --model " + model + " --prompt hi --max-tokens 2");
  ASSERT_EQ(bf16.exit_code, 0) << bf16.stderr_text;
  EXPECT_NE(bf16.stderr_text.find("bf16"), std::string::npos) << bf16.stderr_text;
}

TEST(RotationsCommand, AFileTheCacheWouldIgnoreIsAnError) {
  const std::string rotations = rotations_recorded_for(testing::testbed_model_dir());
  for (const char* cache :
       {"--kv-cache-dtype int2 --kv-method naive", "--kv-cache-dtype int2 --kv-method quarot",
        "--kv-cache-dtype int4 --kv-method kivi", "--kv-cache-dtype bf16"}) {
    const CommandResult r = run_oscar("generate --prompt hi --max-tokens 2 " + std::string(cache) +
                                      " --kv-rotations " + rotations);
    EXPECT_NE(r.exit_code, 0) << cache;
    EXPECT_NE(r.stderr_text.find("--kv-rotations " + rotations + ": "), std::string::npos)
        << r.stderr_text;
    EXPECT_NE(r.stderr_text.find("reads no rotations file"), std::string::npos) << r.stderr_text;
  }
  const CommandResult oscar = run_oscar(
      "generate --prompt hi --max-tokens 2 --kv-cache-dtype int2 --kv-rotations " + rotations);
  EXPECT_EQ(oscar.exit_code, 0) << oscar.stderr_text;
}

// The same config and shapes, other weights: only the weights' hash tells the models apart.
TEST(RotationsCommand, RotationsOfOtherWeightsAreRefusedNamingBothModels) {
  const std::string rotations = rotations_recorded_for(testing::testbed_model_dir());
  const std::string other = testing::copy_testbed_model("other-weights");
  {
    // The sign of the first weight of the first tensor in the file: within the hash's first window
    // of that tensor, and a model that still runs.
    std::fstream file(other + "/model.safetensors",
                      std::ios::in | std::ios::out | std::ios::binary);
    uint64_t header_bytes = 0;
    file.read(reinterpret_cast<char*>(&header_bytes), sizeof(header_bytes));
    const std::streamoff high_byte =
        std::streamoff(8 + header_bytes + 1);  // of a little-endian bf16
    char byte = 0;
    file.seekg(high_byte);
    file.read(&byte, 1);
    byte = char(byte ^ 0x80);
    file.seekp(high_byte);
    file.write(&byte, 1);
  }
  const CommandResult r = run_oscar("generate --model " + other +
                                    " --prompt hi --max-tokens 2 --kv-cache-dtype int2 "
                                    "--kv-rotations " +
                                    rotations);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.stderr_text.find(rotations + ": rotations of another model (weights hash differs)"),
            std::string::npos)
      << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("calibrated on " + testing::testbed_model_dir() + " ("),
            std::string::npos)
      << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("not on " + other + " ("), std::string::npos) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("Make this model's rotations with: " + testing::oscar_program() +
                               " calibrate --model " + other + "\n"),
            std::string::npos)
      << r.stderr_text;
  // Its own rotations are accepted.
  const CommandResult own = run_oscar("generate --model " + other +
                                      " --prompt hi --max-tokens 2 --kv-cache-dtype "
                                      "int2 --kv-rotations " +
                                      rotations_recorded_for(other));
  EXPECT_EQ(own.exit_code, 0) << own.stderr_text;
}

// Published rotation files (--kv-rotations-k/-v) are checked by shape against the model: the
// fixtures (2 layers, head_dim 8) are refused for the testbed with a message naming the file and
// the layer counts; the preset refuses the flags it fixes.
TEST(RotationsCommand, PublishedFilesAreCheckedByShape) {
  const std::string data = std::string(OSCAR_SOURCE_DIR) + "/tests/quant/data/";
  const CommandResult r = run_oscar(
      "generate --prompt hi --max-tokens 2 --kv-preset oscar-published "
      "--kv-rotations-k " +
      data + "k_rotation_v2.pt --kv-rotations-v " + data + "v_rotation_v2.pt");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.stderr_text.find("k_rotation_v2.pt: holds 2 layers, the model has 8"),
            std::string::npos)
      << r.stderr_text;
  const CommandResult fixed = run_oscar(
      "generate --prompt hi --max-tokens 2 --kv-preset oscar-published "
      "--kv-clip-k 0.84");
  EXPECT_NE(fixed.exit_code, 0);
  EXPECT_NE(fixed.stderr_text.find("--kv-clip-k excludes --kv-preset"), std::string::npos)
      << fixed.stderr_text;
}

}  // namespace
}  // namespace oscar
