#include "loadgen/load_generator.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

namespace oscar {

nlohmann::json completion_body(const PlannedRequest& request, const std::string& model) {
  nlohmann::json body = {
      {"prompt", request.prompt}, {"max_tokens", request.max_tokens},           {"temperature", 0},
      {"ignore_eos", true},  // fixed output lengths, as vLLM's benchmark asks
      {"stream", true},           {"stream_options", {{"include_usage", true}}}};
  if (!model.empty()) body["model"] = model;
  return body;
}

LoadRun run_load(const std::vector<PlannedRequest>& plan, const LoadOptions& options) {
  // One client thread per request in flight; without a limit, one per request (a thread costs
  // little next to a generation, and this keeps the arrival times honest).
  const int64_t limit = options.concurrency > 0 ? options.concurrency : int64_t(plan.size());
  const auto num_threads = static_cast<size_t>(std::clamp<int64_t>(limit, 1, int64_t(plan.size())));
  LoadRun run;
  run.records.resize(plan.size());
  std::atomic<size_t> next{0};
  const auto start = std::chrono::steady_clock::now();
  auto seconds_since_start = [start] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  auto client = [&] {
    // Requests are taken in arrival order, so a free thread always serves the earliest one.
    for (size_t i = next++; i < plan.size(); i = next++) {
      const PlannedRequest& request = plan[i];
      std::this_thread::sleep_until(start +
                                    std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                        std::chrono::duration<double>(request.arrival_seconds)));
      RequestRecord& record = run.records[i];
      record.requested_input_tokens = int64_t(request.prompt.size());
      record.requested_output_tokens = request.max_tokens;
      record.sent_seconds = seconds_since_start();
      record.response = stream_completion(options.server, "/v1/completions",
                                          completion_body(request, options.model));
    }
  };
  std::vector<std::thread> threads;
  for (size_t t = 0; t < num_threads; ++t) threads.emplace_back(client);
  for (std::thread& thread : threads) thread.join();
  for (const RequestRecord& record : run.records) {
    run.duration_seconds =
        std::max(run.duration_seconds, record.sent_seconds + record.response.seconds);
  }
  return run;
}

}  // namespace oscar
