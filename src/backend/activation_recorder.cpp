#include "backend/activation_recorder.h"

namespace oscar {

ActivationRecorder::ActivationRecorder(const ModelConfig& config)
    : config_(config),
      queries_(size_t(config.num_layers)),
      keys_(size_t(config.num_layers)),
      values_(size_t(config.num_layers)) {}

void ActivationRecorder::observe(const AttentionInputs& in) {
  const int64_t q_size = in.num_tokens * config_.q_dim();
  const int64_t kv_size = in.num_tokens * config_.kv_dim();
  auto& q = queries_[size_t(in.layer)];
  auto& k = keys_[size_t(in.layer)];
  auto& v = values_[size_t(in.layer)];
  q.insert(q.end(), in.queries, in.queries + q_size);
  k.insert(k.end(), in.keys, in.keys + kv_size);
  v.insert(v.end(), in.values, in.values + kv_size);
}

int64_t ActivationRecorder::tokens(int64_t layer) const {
  return int64_t(keys_[size_t(layer)].size()) / config_.kv_dim();
}

std::vector<float> head_rows(const std::vector<float>& data, int64_t tokens, int64_t heads,
                             int64_t first_head, int64_t head_count, int64_t d) {
  std::vector<float> rows;
  rows.reserve(size_t(tokens * head_count * d));
  for (int64_t t = 0; t < tokens; ++t) {
    const float* start = data.data() + (t * heads + first_head) * d;
    rows.insert(rows.end(), start, start + head_count * d);
  }
  return rows;
}

}  // namespace oscar
