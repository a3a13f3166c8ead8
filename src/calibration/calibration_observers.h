#pragma once
// The activation observers of the two calibration passes and of held-out error reports.
#include <vector>

#include "backend/backend.h"
#include "calibration/covariance.h"
#include "model/model_config.h"

namespace oscar {

// Pass 1: sums of q^T q per (layer, KV head) over the query heads of each KV group.
class QueryCovarianceObserver : public ActivationObserver {
 public:
  explicit QueryCovarianceObserver(const ModelConfig& config);
  void observe(const AttentionInputs& inputs) override;
  const OuterProductSums& sums() const { return sums_; }

 private:
  const ModelConfig& config_;
  OuterProductSums sums_;
};

// Pass 2: sums of w_t v_t^T v_t with w_t = k_t C_Q k_t^T, per (layer, KV head); `query_covariance`
// holds C_Q for each slot (layer * num_kv_heads + kv_head).
class ValueCovarianceObserver : public ActivationObserver {
 public:
  ValueCovarianceObserver(const ModelConfig& config,
                          std::vector<std::vector<double>> query_covariance);
  void observe(const AttentionInputs& inputs) override;
  const OuterProductSums& sums() const { return sums_; }

 private:
  const ModelConfig& config_;
  std::vector<std::vector<double>> query_covariance_;
  OuterProductSums sums_;
};

}  // namespace oscar
