#include "model/value_error_feedback.h"

#include <Eigen/Dense>
#include <algorithm>

#include "format/tensor.h"
#include "quant/error_feedback.h"
#include "util/error.h"
#include "util/parallel.h"

namespace oscar {

std::vector<float> value_feedback_factors(const ModelWeights& weights, const KvRotations& rotations,
                                          double damping) {
  using RowMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using FloatRowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const ModelConfig& config = weights.config;
  const int64_t d = config.head_dim, hidden = config.hidden_size, q_dim = config.q_dim();
  require(rotations.head_dim == d && rotations.num_layers == config.num_layers,
          "value error feedback: the rotations file does not match the model");
  std::vector<float> factors(size_t(config.num_layers * config.num_kv_heads * d * d));
  for (int64_t layer = 0; layer < config.num_layers; ++layer) {
    const std::vector<float> o_proj =
        to_float_vector(weights.layers[size_t(layer)].o_proj);  // [hidden][q_dim]
    require(int64_t(o_proj.size()) == hidden * q_dim,
            "value error feedback: layer {} o_proj has {} values", layer, o_proj.size());
    const Eigen::Map<const FloatRowMatrix> w_o(o_proj.data(), hidden, q_dim);
    // KV heads on their own threads: each factor is computed whole by one thread, so the result
    // does not depend on the thread count. (A Qwen3-8B layer is 4 x 8 products of 4096 x 128.)
    parallel_for(0, config.num_kv_heads, [&](int64_t kv_head) {
      RowMatrix m = RowMatrix::Zero(d, d);
      for (int64_t g = 0; g < config.group_size(); ++g) {
        const RowMatrix w_g =
            w_o.middleCols((kv_head * config.group_size() + g) * d, d).cast<double>();
        m += w_g.transpose() * w_g;
      }
      const RowMatrix r =
          Eigen::Map<const FloatRowMatrix>(rotations.value_rotation(layer, kv_head), d, d)
              .cast<double>();
      RowMatrix rotated = r.transpose() * m * r;
      rotated.diagonal().array() += damping * std::max(rotated.diagonal().mean(), 1e-30);
      const std::vector<float> factor =
          feedback_factor(std::span<const double>(rotated.data(), size_t(d * d)), d);
      std::copy(factor.begin(), factor.end(),
                factors.begin() + (layer * config.num_kv_heads + kv_head) * d * d);
    });
  }
  return factors;
}

}  // namespace oscar
