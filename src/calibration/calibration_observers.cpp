#include "calibration/calibration_observers.h"

#include "util/parallel.h"

namespace oscar {

QueryCovarianceObserver::QueryCovarianceObserver(const ModelConfig& config)
    : config_(config), sums_(config.num_layers * config.num_kv_heads, config.head_dim) {}

void QueryCovarianceObserver::observe(const AttentionInputs& in) {
  const int64_t d = config_.head_dim;
  const int64_t group = config_.group_size();
  parallel_for(0, config_.num_kv_heads, [&](int64_t kv_head) {
    const int64_t slot = in.layer * config_.num_kv_heads + kv_head;
    for (int64_t t = 0; t < in.num_tokens; ++t) {
      for (int64_t g = 0; g < group; ++g) {
        sums_.add(slot, in.queries + (t * config_.num_heads + kv_head * group + g) * d);
      }
    }
  });
}

ValueCovarianceObserver::ValueCovarianceObserver(const ModelConfig& config,
                                                 std::vector<std::vector<double>> query_covariance)
    : config_(config),
      query_covariance_(std::move(query_covariance)),
      sums_(config.num_layers * config.num_kv_heads, config.head_dim) {}

void ValueCovarianceObserver::observe(const AttentionInputs& in) {
  const int64_t d = config_.head_dim;
  const int64_t kv_heads = config_.num_kv_heads;
  parallel_for(0, kv_heads, [&](int64_t kv_head) {
    const int64_t slot = in.layer * kv_heads + kv_head;
    for (int64_t t = 0; t < in.num_tokens; ++t) {
      const float* key = in.keys + (t * kv_heads + kv_head) * d;
      const double weight = quadratic_form(key, query_covariance_[size_t(slot)], d);
      sums_.add(slot, in.values + (t * kv_heads + kv_head) * d, weight);
    }
  });
}

}  // namespace oscar
