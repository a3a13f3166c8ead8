#pragma once
// Sends a planned workload to a server: each request leaves at its arrival time, or later when
// `concurrency` requests are already in flight (then it waits for one to end, as a client pool
// would). Every request streams, so that the first token and each later one are timed.
#include <cstdint>
#include <string>
#include <vector>

#include "loadgen/openai_client.h"
#include "loadgen/workload.h"

namespace oscar {

struct LoadOptions {
  ServerConnection server;
  std::string model;        // the "model" field of each request
  int64_t concurrency = 0;  // requests in flight at most; 0: no limit
};

struct RequestRecord {
  int64_t requested_input_tokens = 0;
  int64_t requested_output_tokens = 0;
  double sent_seconds = 0;  // after the start of the run
  StreamedResponse response;
};

struct LoadRun {
  std::vector<RequestRecord> records;  // in the order of the plan
  double duration_seconds = 0;         // start of the run to the end of the last response
};

LoadRun run_load(const std::vector<PlannedRequest>& plan, const LoadOptions& options);

// The request body for one planned request: greedy, a fixed output length, streamed with usage.
nlohmann::json completion_body(const PlannedRequest& request, const std::string& model);

}  // namespace oscar
