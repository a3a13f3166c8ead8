#pragma once
// The engine on its own thread. HTTP handler threads submit requests and read each request's
// outputs from a stream; the loop admits submissions between steps, runs steps while there is
// work, and publishes a snapshot of its state for /metrics. Only the loop touches the engine.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "server/metrics.h"

namespace oscar {

// One request's outputs, in order, as the loop produces them.
class RequestStream {
 public:
  // The next output, waiting up to `timeout`; nullopt on timeout.
  std::optional<RequestOutput> next(std::chrono::milliseconds timeout);
  RequestId id() const { return id_; }

 private:
  friend class EngineService;
  void push(RequestOutput output);
  // Blocks until the loop accepted (returns the id) or rejected (throws ApiError 400) the request.
  RequestId wait_accepted();

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<RequestOutput> outputs_;
  RequestId id_ = 0;
  bool accepted_ = false;
  std::optional<std::string> rejection_;
  std::chrono::steady_clock::time_point submitted_;
  std::chrono::steady_clock::time_point last_token_;
  bool has_token_ = false;
};

class EngineService {
 public:
  EngineService(std::unique_ptr<Engine> engine, ServerMetrics& metrics);
  ~EngineService();  // stops the loop; requests in flight end as cancelled

  // Queues the requests (the choices of one API request) together; returns their streams once the
  // engine accepted them all. Where it refuses one, the others are cancelled and ApiError 400 names
  // the refusal.
  std::vector<std::shared_ptr<RequestStream>> submit(std::vector<GenerationRequest> requests);
  void cancel(RequestId id);
  EngineSnapshot snapshot() const;
  // Drops every cached prefix that no request uses, between two steps of the loop, and returns
  // once done; with no request in flight the next snapshot() shows the pools at their baseline.
  void reset_prefix_cache();

 private:
  void loop();
  void admit_pending();
  // One engine step: its outputs timed, counted and sent to their streams.
  void run_step();
  void deliver(const std::vector<RequestOutput>& outputs);
  void abort_in_flight(const std::string& error);
  void publish_snapshot();

  std::unique_ptr<Engine> engine_;
  ServerMetrics& metrics_;
  mutable std::mutex mutex_;
  std::condition_variable work_;
  std::vector<std::pair<GenerationRequest, std::shared_ptr<RequestStream>>> pending_;
  std::vector<RequestId> cancellations_;
  std::vector<std::promise<void>> prefix_cache_resets_;
  std::map<RequestId, std::shared_ptr<RequestStream>> streams_;  // loop thread only
  EngineSnapshot snapshot_;
  std::deque<std::pair<std::chrono::steady_clock::time_point, int64_t>> recent_tokens_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace oscar
