#include "loadgen/latency_report.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

namespace oscar {
namespace {

double percentile(const std::vector<double>& sorted, double fraction) {
  const double rank = fraction * double(sorted.size() - 1);
  const auto below = static_cast<size_t>(std::floor(rank));
  const size_t above = std::min(below + 1, sorted.size() - 1);
  return sorted[below] + (rank - double(below)) * (sorted[above] - sorted[below]);
}

nlohmann::json stats_json(const LatencyStats& s) {
  return {{"mean", s.mean}, {"p50", s.p50}, {"p90", s.p90},
          {"p99", s.p99},   {"max", s.max}, {"count", s.count}};
}

std::string stats_rows(const char* title, const char* unit, const LatencyStats& s) {
  std::string out = fmt::format("{:-^56}\n", fmt::format(" {} ", title));
  out += fmt::format("{:<40}{:>16.2f}\n", fmt::format("Mean {} (ms):", unit), s.mean);
  out += fmt::format("{:<40}{:>16.2f}\n", fmt::format("P50 {} (ms):", unit), s.p50);
  out += fmt::format("{:<40}{:>16.2f}\n", fmt::format("P90 {} (ms):", unit), s.p90);
  out += fmt::format("{:<40}{:>16.2f}\n", fmt::format("P99 {} (ms):", unit), s.p99);
  return out;
}

}  // namespace

LatencyStats latency_stats(std::vector<double> values) {
  LatencyStats s;
  s.count = int64_t(values.size());
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  s.mean = std::accumulate(values.begin(), values.end(), 0.0) / double(values.size());
  s.p50 = percentile(values, 0.50);
  s.p90 = percentile(values, 0.90);
  s.p99 = percentile(values, 0.99);
  s.max = values.back();
  return s;
}

LoadReport summarize(const LoadRun& run) {
  LoadReport report;
  std::vector<double> ttft, itl, tpot, e2e;
  for (const RequestRecord& record : run.records) {
    const StreamedResponse& r = record.response;
    if (!r.ok()) {
      ++report.failed;
      if (report.first_errors.size() < 3) {
        report.first_errors.push_back(
            r.error.empty() ? "stream ended without [DONE] or finish_reason" : r.error);
      }
      continue;
    }
    ++report.completed;
    report.input_tokens += r.prompt_tokens >= 0 ? r.prompt_tokens : record.requested_input_tokens;
    const int64_t output =
        r.completion_tokens >= 0 ? r.completion_tokens : int64_t(r.text_chunk_seconds.size());
    report.output_tokens += output;
    e2e.push_back(r.seconds * 1e3);
    if (r.text_chunk_seconds.empty()) continue;
    ttft.push_back(r.text_chunk_seconds.front() * 1e3);
    for (size_t i = 1; i < r.text_chunk_seconds.size(); ++i) {
      itl.push_back((r.text_chunk_seconds[i] - r.text_chunk_seconds[i - 1]) * 1e3);
    }
    if (output > 1)
      tpot.push_back((r.seconds - r.text_chunk_seconds.front()) * 1e3 / double(output - 1));
  }
  report.duration_seconds = run.duration_seconds;
  if (run.duration_seconds > 0) {
    report.requests_per_second = double(report.completed) / run.duration_seconds;
    report.input_tokens_per_second = double(report.input_tokens) / run.duration_seconds;
    report.output_tokens_per_second = double(report.output_tokens) / run.duration_seconds;
  }
  report.time_to_first_token = latency_stats(std::move(ttft));
  report.inter_token_latency = latency_stats(std::move(itl));
  report.time_per_output_token = latency_stats(std::move(tpot));
  report.end_to_end_latency = latency_stats(std::move(e2e));
  return report;
}

std::string format_table(const LoadReport& r) {
  std::string out = fmt::format("{:=^56}\n", " Serving Benchmark Result ");
  auto row = [&](const char* name, const std::string& value) {
    out += fmt::format("{:<40}{:>16}\n", name, value);
  };
  row("Successful requests:", std::to_string(r.completed));
  row("Failed requests:", std::to_string(r.failed));
  row("Benchmark duration (s):", fmt::format("{:.2f}", r.duration_seconds));
  row("Total input tokens:", std::to_string(r.input_tokens));
  row("Total generated tokens:", std::to_string(r.output_tokens));
  row("Request throughput (req/s):", fmt::format("{:.2f}", r.requests_per_second));
  row("Input token throughput (tok/s):", fmt::format("{:.2f}", r.input_tokens_per_second));
  row("Output token throughput (tok/s):", fmt::format("{:.2f}", r.output_tokens_per_second));
  out += stats_rows("Time to First Token", "TTFT", r.time_to_first_token);
  out += stats_rows("Time per Output Token (excl. 1st token)", "TPOT", r.time_per_output_token);
  out += stats_rows("Inter-token Latency", "ITL", r.inter_token_latency);
  out += stats_rows("End-to-end Latency", "E2EL", r.end_to_end_latency);
  out += fmt::format("{:=^56}\n", "");
  for (const std::string& error : r.first_errors) out += "failed: " + error + "\n";
  return out;
}

nlohmann::json to_json(const LoadReport& r) {
  return {{"completed", r.completed},
          {"failed", r.failed},
          {"errors", r.first_errors},
          {"duration_s", r.duration_seconds},
          {"input_tokens", r.input_tokens},
          {"output_tokens", r.output_tokens},
          {"request_throughput", r.requests_per_second},
          {"input_tokens_per_s", r.input_tokens_per_second},
          {"output_tokens_per_s", r.output_tokens_per_second},
          {"ttft_ms", stats_json(r.time_to_first_token)},
          {"tpot_ms", stats_json(r.time_per_output_token)},
          {"itl_ms", stats_json(r.inter_token_latency)},
          {"e2e_latency_ms", stats_json(r.end_to_end_latency)}};
}

}  // namespace oscar
