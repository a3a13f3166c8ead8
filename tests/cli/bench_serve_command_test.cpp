// `oscar bench serve`: a small load against the testbed, in-process and against a running
// server; the JSON report holds every request and ordered, positive latencies. A model whose config
// pads its vocabulary past its tokenizer's is served without a failed request.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>

#include <nlohmann/json.hpp>

#include "oscar_command.h"
#include "support/padded_vocab_model.h"
#include "support/test_paths.h"

namespace oscar::testing {
namespace {

using nlohmann::json;

json read_json(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

void expect_ordered_latencies(const json& stats, const std::string& name) {
  ASSERT_TRUE(stats.is_object()) << name;
  for (const char* key : {"mean", "p50", "p90", "p99", "max", "count"}) {
    ASSERT_TRUE(stats.contains(key) && stats[key].is_number()) << name << "." << key;
  }
  EXPECT_GT(stats["count"].get<int64_t>(), 0) << name;
  EXPECT_GT(stats["p50"].get<double>(), 0) << name;
  EXPECT_LE(stats["p50"].get<double>(), stats["p90"].get<double>()) << name;
  EXPECT_LE(stats["p90"].get<double>(), stats["p99"].get<double>()) << name;
  EXPECT_LE(stats["p99"].get<double>(), stats["max"].get<double>()) << name;
  EXPECT_LE(stats["mean"].get<double>(), stats["max"].get<double>()) << name;
}

void expect_sane_report(const json& report, int64_t num_requests) {
  EXPECT_EQ(report["completed"], num_requests) << report.dump(2);
  EXPECT_EQ(report["failed"], 0);
  EXPECT_GT(report["duration_s"].get<double>(), 0);
  EXPECT_GT(report["request_throughput"].get<double>(), 0);
  EXPECT_GT(report["input_tokens_per_s"].get<double>(), 0);
  EXPECT_GT(report["output_tokens_per_s"].get<double>(), 0);
  for (const char* stats : {"ttft_ms", "tpot_ms", "itl_ms", "e2e_latency_ms"}) {
    expect_ordered_latencies(report[stats], stats);
  }
  EXPECT_LT(report["ttft_ms"]["max"].get<double>(), report["e2e_latency_ms"]["max"].get<double>());
  EXPECT_EQ(report["ttft_ms"]["count"], num_requests);
}

TEST(BenchServeCommand, InProcessServerReport) {
  const std::string path = make_temp_dir("bench-serve") + "/report.json";
  const CommandResult r = run_oscar(
      "bench serve --device cpu --kv-pool-gb 0.02 --kv-cache-dtype int2 --kv-method quarot "
      "--kv-sink-tokens 8 "
      "--kv-recent-tokens 24 --kv-page-size 16 --num-requests 6 --concurrency 3 --request-rate 30 "
      "--input-len 32 "
      "--output-len 8 --len-jitter 0.25 --seed 7 --json " +
      path);
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stdout_text.find("Successful requests:"), std::string::npos) << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("P99 ITL (ms):"), std::string::npos) << r.stdout_text;
  const json report = read_json(path);
  expect_sane_report(report, 6);
  // Lengths within +-25% of 32 and 8, as the server counted them.
  EXPECT_GE(report["input_tokens"].get<int64_t>(), 6 * 24);
  EXPECT_LE(report["input_tokens"].get<int64_t>(), 6 * 40);
  EXPECT_GE(report["output_tokens"].get<int64_t>(), 6 * 6);
  EXPECT_LE(report["output_tokens"].get<int64_t>(), 6 * 10);
  const json& config = report["config"];
  EXPECT_EQ(config["server"], "in-process");
  EXPECT_EQ(config["model"], "testbed");
  EXPECT_EQ(config["num_requests"], 6);
  EXPECT_EQ(config["concurrency"], 3);
  EXPECT_EQ(config["request_rate"], 30.0);
  EXPECT_EQ(config["input_len"], 32);
  EXPECT_EQ(config["output_len"], 8);
  EXPECT_EQ(config["seed"], 7);
  EXPECT_NE(config["server_description"].get<std::string>().find("int2 quarot"), std::string::npos);
}

// The run that ended the process with "token id 99696 is outside the vocabulary" (the padding's
// ids win every step of this model unless masked).
TEST(BenchServeCommand, PaddedVocabularyServesEveryRequest) {
  const std::string model = make_padded_vocab_model("bench-serve-padded");
  const std::string path = make_temp_dir("bench-serve-padded") + "/report.json";
  const CommandResult r =
      run_oscar("bench serve --model " + model +
                " --device cpu --kv-pool-gb 0.02 --num-requests 4 --concurrency 2 "
                "--input-len 16 --output-len 8 --seed 3 --json " +
                path);
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const json report = read_json(path);
  EXPECT_EQ(report["completed"], 4) << report.dump();
  EXPECT_EQ(report["failed"], 0) << report.dump();
  EXPECT_EQ(report["output_tokens"], 4 * 8) << report.dump();
}

TEST(BenchServeCommand, AgainstARunningServerWithAnApiKey) {
  BackgroundOscar serve("serve --device cpu --port 0 --kv-pool-gb 0.02 --api-key sesame");
  const std::string line = serve.wait_for_stderr_line("serving", std::chrono::seconds(60));
  std::smatch m;
  ASSERT_TRUE(std::regex_search(line, m, std::regex(R"((http://[0-9.]+:[0-9]+))")))
      << serve.stderr_text();
  const std::string url = m[1];
  const std::string path = make_temp_dir("bench-serve-url") + "/report.json";
  const CommandResult r =
      run_oscar("bench serve --url " + url +
                " --api-key sesame --num-requests 4 --input-len 16 --output-len 6 --json " + path);
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const json report = read_json(path);
  expect_sane_report(report, 4);
  EXPECT_EQ(report["input_tokens"], 4 * 16);
  EXPECT_EQ(report["output_tokens"], 4 * 6);
  EXPECT_EQ(report["config"]["server"], "remote");
  EXPECT_TRUE(report["config"]["request_rate"].is_null());  // all at once

  const CommandResult wrong_key =
      run_oscar("bench serve --url " + url + " --api-key wrong --num-requests 2");
  EXPECT_NE(wrong_key.exit_code, 0);
  EXPECT_NE(wrong_key.stderr_text.find("401"), std::string::npos) << wrong_key.stderr_text;
  EXPECT_EQ(serve.terminate(std::chrono::seconds(30)), 0) << serve.stderr_text();
}

}  // namespace
}  // namespace oscar::testing
