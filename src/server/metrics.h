#pragma once
// Prometheus metrics of the server: latency histograms observed per token, counters per request
// outcome, and gauges read from the engine's latest snapshot (text exposition format 0.0.4), under
// oscar's names and, for the gauges a gateway balances replicas by, vLLM's.
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace oscar {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  std::string render(const std::string& name, const std::string& help) const;

 private:
  std::vector<double> upper_bounds_;
  std::vector<int64_t> counts_;  // per bucket (not cumulative)
  double sum_ = 0;
  int64_t count_ = 0;
};

// What the engine loop publishes after each step.
struct EngineSnapshot {
  int64_t running = 0;
  int64_t waiting = 0;
  int64_t full_pages_used = 0, full_pages_free = 0;
  int64_t quantized_pages_used = 0, quantized_pages_free = 0;
  int64_t band_pages_used = 0, band_pages_free = 0;  // 4-bit band pages (--kv-band-tokens)
  double bits_per_element = 0;       // of the running requests' KV pages, over their tokens
  double kv_cache_usage = 0;         // 0-1 (Engine::kv_cache_usage)
  int64_t prompt_tokens = 0;         // submitted
  int64_t cached_prompt_tokens = 0;  // served by the prefix cache
  int64_t generated_tokens = 0;
  int64_t preemptions = 0;
  double tokens_per_second = 0;  // generated, over the last 10 s
  std::string kv_description;
  std::string backend_failure;  // Backend::failure(): the server can run no more steps
};

class ServerMetrics {
 public:
  ServerMetrics();
  void observe_time_to_first_token(double seconds);
  void observe_inter_token_latency(double seconds);
  void count_request(const std::string& outcome);  // "ok", "error", "cancelled", "rejected"
  // oscar's families, and the vLLM families that gateways pick a replica by (queue length, running
  // requests, KV-cache usage), labelled with the served model's name as vLLM labels them.
  std::string render(const EngineSnapshot& engine, const std::string& model_name) const;

 private:
  mutable std::mutex mutex_;
  Histogram time_to_first_token_;
  Histogram inter_token_latency_;
  std::map<std::string, int64_t> requests_;
};

}  // namespace oscar
