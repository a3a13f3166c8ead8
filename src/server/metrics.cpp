#include "server/metrics.h"

#include <algorithm>

#include <fmt/format.h>

namespace oscar {

Histogram::Histogram(std::vector<double> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)), counts_(upper_bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  const auto bucket =
      std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), value) - upper_bounds_.begin();
  ++counts_[size_t(bucket)];
  sum_ += value;
  ++count_;
}

std::string Histogram::render(const std::string& name, const std::string& help) const {
  std::string out = fmt::format("# HELP {0} {1}\n# TYPE {0} histogram\n", name, help);
  int64_t cumulative = 0;
  for (size_t i = 0; i < upper_bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, upper_bounds_[i], cumulative);
  }
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, count_, name,
                     sum_, name, count_);
  return out;
}

ServerMetrics::ServerMetrics()
    : time_to_first_token_({0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}),
      inter_token_latency_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}) {}

void ServerMetrics::observe_time_to_first_token(double seconds) {
  const std::lock_guard lock(mutex_);
  time_to_first_token_.observe(seconds);
}

void ServerMetrics::observe_inter_token_latency(double seconds) {
  const std::lock_guard lock(mutex_);
  inter_token_latency_.observe(seconds);
}

void ServerMetrics::count_request(const std::string& outcome) {
  const std::lock_guard lock(mutex_);
  ++requests_[outcome];
}

namespace {

// A label value escaped as the text format asks (backslash, double quote, newline).
std::string label_value(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '\\' || c == '"') out += '\\';
    out += c == '\n' ? std::string("\\n") : std::string(1, c);
  }
  return out;
}

// The gauges gateways read (the Gateway API inference extension's model servers protocol, the
// SGLang model gateway), under the names vLLM exports them by.
std::string render_vllm_gauges(const EngineSnapshot& e, const std::string& model_name) {
  std::string out;
  const std::string label = fmt::format("{{model_name=\"{}\"}}", label_value(model_name));
  auto gauge = [&](const char* name, const char* help, double value) {
    out += fmt::format("# HELP vllm:{0} {1}\n# TYPE vllm:{0} gauge\nvllm:{0}{2} {3}\n", name, help,
                       label, value);
  };
  gauge("num_requests_running", "Number of requests in model execution batches.",
        double(e.running));
  gauge("num_requests_waiting", "Number of requests waiting to be processed.", double(e.waiting));
  gauge("kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", e.kv_cache_usage);
  return out;
}

}  // namespace

std::string ServerMetrics::render(const EngineSnapshot& e, const std::string& model_name) const {
  std::string out;
  auto gauge = [&](const char* name, const char* help, double value) {
    out += fmt::format("# HELP oscar_{0} {1}\n# TYPE oscar_{0} gauge\noscar_{0} {2}\n", name, help,
                       value);
  };
  auto counter = [&](const char* name, const char* help, double value) {
    out += fmt::format("# HELP oscar_{0} {1}\n# TYPE oscar_{0} counter\noscar_{0} {2}\n", name,
                       help, value);
  };
  gauge("num_requests_running", "Requests in the running batch.", double(e.running));
  gauge("num_requests_waiting", "Requests waiting for admission.", double(e.waiting));
  out += "# HELP oscar_kv_pages KV cache pages by format and state.\n# TYPE oscar_kv_pages gauge\n";
  out += fmt::format("oscar_kv_pages{{format=\"bf16\",state=\"used\"}} {}\n", e.full_pages_used);
  out += fmt::format("oscar_kv_pages{{format=\"bf16\",state=\"free\"}} {}\n", e.full_pages_free);
  out += fmt::format("oscar_kv_pages{{format=\"quantized\",state=\"used\"}} {}\n",
                     e.quantized_pages_used);
  out += fmt::format("oscar_kv_pages{{format=\"quantized\",state=\"free\"}} {}\n",
                     e.quantized_pages_free);
  out += fmt::format("oscar_kv_pages{{format=\"band\",state=\"used\"}} {}\n", e.band_pages_used);
  out += fmt::format("oscar_kv_pages{{format=\"band\",state=\"free\"}} {}\n", e.band_pages_free);
  gauge("kv_bits_per_element", "Bits per K/V element of the running requests' KV pages.",
        e.bits_per_element);
  gauge("kv_cache_usage", "Share (0-1) of the fullest KV pool's pages held by requests.",
        e.kv_cache_usage);
  const double hit_rate =
      e.prompt_tokens > 0 ? double(e.cached_prompt_tokens) / double(e.prompt_tokens) : 0.0;
  gauge("prefix_cache_hit_rate", "Share of prompt tokens served from the prefix cache.", hit_rate);
  gauge("generation_tokens_per_second", "Generated tokens per second over the last 10 s.",
        e.tokens_per_second);
  counter("prompt_tokens_total", "Prompt tokens of accepted requests.", double(e.prompt_tokens));
  counter("generation_tokens_total", "Generated tokens.", double(e.generated_tokens));
  counter("preemptions_total", "Sequences preempted for lack of KV pages.", double(e.preemptions));
  const std::lock_guard lock(mutex_);
  out +=
      "# HELP oscar_requests_total Finished requests by outcome.\n# TYPE oscar_requests_total "
      "counter\n";
  for (const auto& [outcome, count] : requests_) {
    out += fmt::format("oscar_requests_total{{outcome=\"{}\"}} {}\n", outcome, count);
  }
  out += time_to_first_token_.render("oscar_time_to_first_token_seconds",
                                     "Time from arrival to the first token.");
  out += inter_token_latency_.render("oscar_inter_token_latency_seconds",
                                     "Time between consecutive tokens.");
  out += fmt::format(
      "# HELP oscar_kv_cache_info The KV cache format.\n# TYPE oscar_kv_cache_info gauge\n"
      "oscar_kv_cache_info{{format=\"{}\"}} 1\n",
      e.kv_description);
  out += render_vllm_gauges(e, model_name);
  return out;
}

}  // namespace oscar
