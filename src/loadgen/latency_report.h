#pragma once
// The numbers a serving benchmark reports (as vLLM's benchmark_serving does): throughput, and
// the distribution of time to first token (TTFT), inter-token latency (ITL: the gap between two
// chunks of text of one stream), time per output token after the first (TPOT) and end-to-end
// latency of the requests that completed.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "loadgen/load_generator.h"

namespace oscar {

struct LatencyStats {  // milliseconds
  double mean = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;
  int64_t count = 0;  // samples
};

// Percentiles interpolate linearly between the closest ranks (numpy's default).
LatencyStats latency_stats(std::vector<double> milliseconds);

struct LoadReport {
  int64_t completed = 0;
  int64_t failed = 0;
  std::vector<std::string> first_errors;  // a few, to say why requests failed
  double duration_seconds = 0;
  int64_t input_tokens = 0;  // of completed requests, as the server counted them (usage)
  int64_t output_tokens = 0;
  double requests_per_second = 0;
  double input_tokens_per_second = 0;
  double output_tokens_per_second = 0;
  LatencyStats time_to_first_token;
  LatencyStats inter_token_latency;
  LatencyStats time_per_output_token;
  LatencyStats end_to_end_latency;
};

LoadReport summarize(const LoadRun& run);
std::string format_table(const LoadReport& report);
nlohmann::json to_json(const LoadReport& report);

}  // namespace oscar
