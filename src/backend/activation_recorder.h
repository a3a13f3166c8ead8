#pragma once
// An observer that keeps copies of every layer's attention inputs over a short sequence, for
// offline analyses (calibration reports, `oscar eval attn-error`).
#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace oscar {

// Keeps copies of every layer's q, k, v (one short sequence, for error reports).
class ActivationRecorder : public ActivationObserver {
 public:
  explicit ActivationRecorder(const ModelConfig& config);
  void observe(const AttentionInputs& inputs) override;
  // [tokens][num_heads][D] / [tokens][num_kv_heads][D] of one layer, over all steps so far.
  const std::vector<float>& queries(int64_t layer) const { return queries_[size_t(layer)]; }
  const std::vector<float>& keys(int64_t layer) const { return keys_[size_t(layer)]; }
  const std::vector<float>& values(int64_t layer) const { return values_[size_t(layer)]; }
  int64_t tokens(int64_t layer) const;

 private:
  const ModelConfig& config_;
  std::vector<std::vector<float>> queries_, keys_, values_;
};

// Rows of one KV head (or of one query head group) pulled out of [tokens][heads][D].
std::vector<float> head_rows(const std::vector<float>& data, int64_t tokens, int64_t heads,
                             int64_t first_head, int64_t head_count, int64_t head_dim);

}  // namespace oscar
