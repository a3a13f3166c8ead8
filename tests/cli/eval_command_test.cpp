// `oscar calibrate` and `oscar eval` as a user runs them: a small calibration, perplexity with the
// JSON fields scripts read, needle-in-a-haystack and attention-error reports with their figures,
// OSCAR's defaults, key and value error feedback, and rotation files that belong to another model
// refused with a clear error.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "format/safetensors.h"
#include "oscar_command.h"
#include "support/test_paths.h"
#include "util/file_io.h"

namespace oscar {
namespace {

using testing::CommandResult;
using testing::run_oscar;

// One small calibration shared by the tests of this file. CTest runs each test in a process of
// its own, so the file is kept beside the test binary (one per build tree) and made once: tests
// that start together wait on a lock for the first one's file instead of each calibrating, and
// it is made under a name of this process, then renamed, so that no test reads half a file.
const std::string& rotations_file() {
  static const std::string path = [] {
    const auto build_dir = std::filesystem::canonical("/proc/self/exe").parent_path();
    const std::string out = (build_dir / "eval-command-test-rotations.safetensors").string();
    const int lock = ::open((out + ".lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (lock >= 0) ::flock(lock, LOCK_EX);
    // A file kept from a build whose calibrate did not record the model's weights is made again.
    if (!std::filesystem::exists(out) ||
        !SafetensorsFile::open(out)->metadata().contains("model_weights_hash")) {
      const std::string partial = out + "." + std::to_string(::getpid());
      const CommandResult r = run_oscar(
          "calibrate --data " + testing::testbed_model_dir() +
          "/calib.xz --tokens 2048 --seq-len 1024 --held-out-tokens 256 --out " + partial);
      EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
      EXPECT_NE(r.stdout_text.find("max |R R^T - I|"), std::string::npos) << r.stdout_text;
      if (r.exit_code == 0) std::filesystem::rename(partial, out);
    }
    if (lock >= 0) ::close(lock);  // releases the lock
    return out;
  }();
  return path;
}

nlohmann::json parse_json(const std::string& text) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& error) {
    ADD_FAILURE() << "not JSON: " << error.what() << "\n" << text;
    return {};
  }
}

TEST(EvalCommand, PerplexityJsonHasTheFieldsAndOscarBeatsNaive) {
  const std::string window = "eval ppl --windows 2 --context 512 --json ";
  const CommandResult bf16 = run_oscar(window);
  // Without the band (OSCAR's default, below), and naive with OSCAR's group parameters and clip
  // ratios: the comparison is of the methods alone.
  const CommandResult oscar = run_oscar(
      window + "--kv-cache-dtype int2 --kv-method oscar --kv-rotations " + rotations_file() +
      " --kv-sink-tokens 16 --kv-recent-tokens 32 "
      "--kv-band-tokens 0");
  const CommandResult naive =
      run_oscar(window +
                "--kv-cache-dtype int2 --kv-method naive --kv-sink-tokens 16 "
                "--kv-recent-tokens 32 --kv-scale-format q8 --kv-clip-k 0.84 "
                "--kv-clip-v 0.92");
  for (const CommandResult* r : {&bf16, &oscar, &naive})
    ASSERT_EQ(r->exit_code, 0) << r->stderr_text;
  const auto b = parse_json(bf16.stdout_text), o = parse_json(oscar.stdout_text),
             n = parse_json(naive.stdout_text);
  for (const char* field : {"ppl", "tokens", "bpe", "bpe_128k", "window_ppl", "kv"}) {
    EXPECT_TRUE(o.contains(field)) << field << " missing in " << oscar.stdout_text;
  }
  EXPECT_EQ(o["tokens"].get<int64_t>(), 2 * 511);
  EXPECT_EQ(b["bpe"].get<double>(), 16.0);
  // OSCAR's defaults: q8 group parameters and the clip ratios 0.84 / 0.92; 2.14 bits at 128K with
  // groups of 128 and these small bf16 regions (2.16 with the default 64 + 256 tokens).
  EXPECT_NE(o["kv"].get<std::string>().find("q8 clip 0.84/0.92"), std::string::npos) << o["kv"];
  EXPECT_NEAR(o["bpe_128k"].get<double>(), 2.14, 0.01);
  EXPECT_GT(o["bpe"].get<double>(), o["bpe_128k"].get<double>());  // short windows: more bf16
  const double p_bf16 = b["ppl"].get<double>(), p_oscar = o["ppl"].get<double>(),
               p_naive = n["ppl"].get<double>();
  EXPECT_GT(p_oscar, p_bf16 * 0.99);
  EXPECT_LT(p_oscar, p_naive);
}

TEST(EvalCommand, ClipRatiosAsGivenOrSearched) {
  const std::string oscar =
      "eval ppl --windows 1 --context 128 --json --kv-cache-dtype int2 --kv-method oscar "
      "--kv-rotations " +
      rotations_file();
  const CommandResult published = run_oscar(oscar + " --kv-scale-format f16 --kv-clip-k 0.96");
  ASSERT_EQ(published.exit_code, 0) << published.stderr_text;
  EXPECT_NE(parse_json(published.stdout_text)["kv"].get<std::string>().find("f16 clip 0.96/0.92"),
            std::string::npos)
      << published.stdout_text;
  const CommandResult searched = run_oscar(oscar + " --kv-clip-search");
  ASSERT_EQ(searched.exit_code, 0) << searched.stderr_text;
  EXPECT_NE(parse_json(searched.stdout_text)["kv"].get<std::string>().find("q8 clip search"),
            std::string::npos)
      << searched.stdout_text;
}

// Keys rounded with error feedback change the codes, not the format; other methods refuse the flag.
// (Without the band, whose 4-bit copies are rounded to nearest: 2-bit codes must be read.)
TEST(EvalCommand, ErrorFeedbackIsOscarsDefaultAndOscarsOnly) {
  const std::string oscar =
      "eval ppl --windows 1 --context 256 --json --kv-cache-dtype int2 --kv-method oscar "
      "--kv-sink-tokens 16 --kv-recent-tokens 32 --kv-band-tokens 0 --kv-rotations " +
      rotations_file();
  const CommandResult nearest =
      run_oscar(oscar + " --no-kv-key-error-feedback --no-kv-value-error-feedback");
  const CommandResult keys_only = run_oscar(oscar + " --no-kv-value-error-feedback");
  const CommandResult fed_back = run_oscar(oscar);
  ASSERT_EQ(nearest.exit_code, 0) << nearest.stderr_text;
  ASSERT_EQ(keys_only.exit_code, 0) << keys_only.stderr_text;
  ASSERT_EQ(fed_back.exit_code, 0) << fed_back.stderr_text;
  const auto n = parse_json(nearest.stdout_text), k = parse_json(keys_only.stdout_text),
             f = parse_json(fed_back.stdout_text);
  EXPECT_NE(f["kv"].get<std::string>().find("key+value feedback"), std::string::npos) << f["kv"];
  EXPECT_NE(k["kv"].get<std::string>().find(" key feedback"), std::string::npos) << k["kv"];
  EXPECT_EQ(n["kv"].get<std::string>().find("feedback"), std::string::npos) << n["kv"];
  EXPECT_EQ(f["bpe_128k"].get<double>(), n["bpe_128k"].get<double>());
  EXPECT_NE(f["ppl"].get<double>(), k["ppl"].get<double>());
  EXPECT_NE(k["ppl"].get<double>(), n["ppl"].get<double>());
  EXPECT_LT(std::abs(f["ppl"].get<double>() / n["ppl"].get<double>() - 1.0), 0.05);
  const CommandResult naive = run_oscar(
      "eval ppl --windows 1 --context 128 --kv-cache-dtype int2 --kv-method naive "
      "--kv-key-error-feedback");
  EXPECT_NE(naive.exit_code, 0);
  EXPECT_NE(naive.stderr_text.find("--kv-key-error-feedback needs --kv-method oscar"),
            std::string::npos)
      << naive.stderr_text;
  const CommandResult quarot = run_oscar(
      "eval ppl --windows 1 --context 128 --kv-cache-dtype int2 --kv-method quarot "
      "--kv-value-error-feedback");
  EXPECT_NE(quarot.exit_code, 0);
  EXPECT_NE(quarot.stderr_text.find("--kv-value-error-feedback needs --kv-method oscar"),
            std::string::npos)
      << quarot.stderr_text;
}

// The 4-bit band: nearly what a bf16 window as long as window + band gives, for a fraction of its
// bytes; OSCAR's default; refused where it does not apply.
TEST(EvalCommand, BandComesCloseToALongerWindow) {
  const std::string quarot =
      "eval ppl --windows 1 --context 512 --json --kv-cache-dtype int2 --kv-method quarot "
      "--kv-sink-tokens 16 ";
  const CommandResult int2 = run_oscar(quarot + "--kv-recent-tokens 32");
  const CommandResult band = run_oscar(quarot + "--kv-recent-tokens 32 --kv-band-tokens 96");
  const CommandResult window = run_oscar(quarot + "--kv-recent-tokens 128");
  for (const CommandResult* r : {&int2, &band, &window})
    ASSERT_EQ(r->exit_code, 0) << r->stderr_text;
  const auto i = parse_json(int2.stdout_text), b = parse_json(band.stdout_text),
             w = parse_json(window.stdout_text);
  EXPECT_NE(b["kv"].get<std::string>().find("recent 32 band 96 int4"), std::string::npos)
      << b["kv"];
  // Closer to the bf16 window than to the 2-bit cache (4 bits are near-lossless at this scale).
  const double band_ppl = b["ppl"].get<double>(), int2_ppl = i["ppl"].get<double>(),
               window_ppl = w["ppl"].get<double>();
  EXPECT_LT(std::abs(band_ppl - window_ppl), 0.5 * std::abs(int2_ppl - window_ppl))
      << "int2 " << int2_ppl << ", band " << band_ppl << ", window " << window_ppl;
  // At 128K the band's 96 tokens (and page slack) at 4.25 bits, on top of their 2-bit codes.
  EXPECT_GT(b["bpe_128k"].get<double>(), i["bpe_128k"].get<double>());
  EXPECT_LT(b["bpe_128k"].get<double>(), i["bpe_128k"].get<double>() + 0.01);
  EXPECT_LT(b["bpe_128k"].get<double>(), w["bpe_128k"].get<double>());
  // OSCAR's INT2 caches have a band of 768 by default (2.184 bits per element at 128K with the
  // default sink and window, 2.159 without); the baselines have none unless told.
  const std::string defaults = "eval ppl --windows 1 --context 128 --json --kv-cache-dtype int2 ";
  const CommandResult oscar =
      run_oscar(defaults + "--kv-method oscar --kv-rotations " + rotations_file());
  const CommandResult quarot_default = run_oscar(defaults + "--kv-method quarot");
  for (const CommandResult* r : {&oscar, &quarot_default})
    ASSERT_EQ(r->exit_code, 0) << r->stderr_text;
  const auto o = parse_json(oscar.stdout_text), q = parse_json(quarot_default.stdout_text);
  EXPECT_NE(o["kv"].get<std::string>().find("recent 256 band 768 int4"), std::string::npos)
      << o["kv"];
  EXPECT_NEAR(o["bpe_128k"].get<double>(), 2.184, 0.001);
  EXPECT_EQ(q["kv"].get<std::string>().find("band"), std::string::npos) << q["kv"];
  const CommandResult kivi = run_oscar(
      "eval ppl --windows 1 --context 128 --kv-cache-dtype int2 --kv-method kivi "
      "--kv-band-tokens 64");
  EXPECT_NE(kivi.exit_code, 0);
  EXPECT_NE(kivi.stderr_text.find("--kv-band-tokens"), std::string::npos) << kivi.stderr_text;
  const CommandResult bf16 = run_oscar("eval ppl --windows 1 --context 128 --kv-band-tokens 64");
  EXPECT_NE(bf16.exit_code, 0);
  EXPECT_NE(bf16.stderr_text.find("per-token INT2 cache"), std::string::npos) << bf16.stderr_text;
}

TEST(EvalCommand, NeedleReportAndHeatMap) {
  const std::string dir = testing::make_temp_dir("eval-niah");
  const CommandResult r =
      run_oscar("eval niah --contexts 384 --depths 0 1 --prompts-per-cell 1 --output " + dir +
                "/niah.json --figure " + dir + "/niah.svg");
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const auto report = parse_json(read_file(dir + "/niah.json"));
  EXPECT_FALSE(report.empty());
  EXPECT_NE(read_file(dir + "/niah.svg").find("<svg"), std::string::npos);
  EXPECT_NE(r.stdout_text.find("384"), std::string::npos) << r.stdout_text;
}

TEST(EvalCommand, AttentionErrorRanksRotationsAboveNaive) {
  const std::string dir = testing::make_temp_dir("eval-attn");
  const CommandResult r =
      run_oscar("eval attn-error --tokens 256 --group-sizes 128 --kv-rotations " +
                rotations_file() + " --output " + dir + "/attn.json --figure " + dir + "/attn.svg");
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(read_file(dir + "/attn.svg").find("<svg"), std::string::npos);
  EXPECT_NE(r.stdout_text.find("oscar g128"), std::string::npos) << r.stdout_text;
  std::map<std::string, double> mean_output_error;
  const nlohmann::json report = parse_json(read_file(dir + "/attn.json"));
  for (const auto& row : report["rows"]) {
    mean_output_error[row["method"].get<std::string>()] += row["outputs"].get<double>();
  }
  ASSERT_TRUE(mean_output_error.contains("oscar g128") && mean_output_error.contains("naive g128"));
  EXPECT_LT(mean_output_error["oscar g128"], mean_output_error["naive g128"]);
  EXPECT_LT(mean_output_error["bf16"], mean_output_error["oscar g128"]);
}

TEST(EvalCommand, RotationsOfAnotherModelAreRefused) {
  // Same shapes, another config: the file's model hash no longer matches.
  const std::string model = testing::copy_testbed_model("eval-other-model");
  auto config = nlohmann::json::parse(read_file(testing::testbed_model_dir() + "/config.json"));
  config["rms_norm_eps"] = 1e-5;
  std::ofstream(model + "/config.json") << config.dump(2);
  const CommandResult r = run_oscar("eval ppl --model " + model +
                                    " --windows 1 --context 128 --kv-cache-dtype int2 "
                                    "--kv-method oscar --kv-rotations " +
                                    rotations_file());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.stderr_text.find(rotations_file()), std::string::npos) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("(config hash differs)"), std::string::npos) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("calibrated on " + testing::testbed_model_dir() + " ("),
            std::string::npos)
      << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("not on " + model + " ("), std::string::npos) << r.stderr_text;
}

TEST(EvalCommand, TruncatedRotationsFileIsRefused) {
  const std::string dir = testing::make_temp_dir("eval-truncated");
  const std::string bytes = read_file(rotations_file());
  std::ofstream(dir + "/cut.safetensors", std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  const CommandResult r = run_oscar(
      "generate --prompt hi --max-tokens 2 --kv-cache-dtype int2 --kv-method oscar "
      "--kv-rotations " +
      dir + "/cut.safetensors");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.stderr_text.find("cut.safetensors"), std::string::npos) << r.stderr_text;
}

}  // namespace
}  // namespace oscar
