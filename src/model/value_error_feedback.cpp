#include "model/value_error_feedback.h"

#include <Eigen/Dense>
#include <algorithm>

#include "format/tensor.h"
#include "quant/error_feedback.h"
#include "util/error.h"
#include "util/parallel.h"

namespace oscar {

std::vector<float> value_feedback_factors(const ModelWeights& weights, const KvRotations& rotations,
                                          KvHeadRange heads, double damping) {
  using RowMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using FloatRowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const ModelConfig& config = weights.config;
  const int64_t d = config.head_dim, hidden = config.hidden_size, q_dim = config.q_dim();
  require(rotations.head_dim == d && rotations.num_layers == config.num_layers,
          "value error feedback: the rotations file does not match the model");
  if (heads.count < 0) heads.count = config.num_kv_heads - heads.first;
  require(heads.first >= 0 && heads.count > 0 && heads.first + heads.count <= config.num_kv_heads,
          "value error feedback: KV heads {}..{} lie outside the model's {}", heads.first,
          heads.first + heads.count - 1, config.num_kv_heads);
  std::vector<float> factors(size_t(config.num_layers * heads.count * d * d));
  for (int64_t layer = 0; layer < config.num_layers; ++layer) {
    const TensorView& o_proj = weights.layers[size_t(layer)].o_proj;
    require(o_proj.shape == std::vector<int64_t>{hidden, q_dim},
            "value error feedback: layer {} o_proj is {}, expected [{}, {}]", layer,
            shape_to_string(o_proj.shape), hidden, q_dim);
  }
  // A task per (layer, KV head), each factor computed whole by one thread, so the result does not
  // depend on the thread count. (A Qwen3-8B layer is 4 x 8 products of 4096 x 128.)
  parallel_for(
      0, config.num_layers * heads.count,
      [&](int64_t task) {
        const int64_t layer = task / heads.count, kv_head = heads.first + task % heads.count;
        // This KV head's group of W_o's columns, [hidden][group * D].
        const int64_t columns = config.group_size() * d;
        const std::vector<float> group_columns = to_float_block(
            weights.layers[size_t(layer)].o_proj, 0, hidden, kv_head * columns, columns);
        const RowMatrix w_o =
            Eigen::Map<const FloatRowMatrix>(group_columns.data(), hidden, columns).cast<double>();
        RowMatrix m = RowMatrix::Zero(d, d);
        for (int64_t g = 0; g < config.group_size(); ++g) {
          const RowMatrix w_g = w_o.middleCols(g * d, d);
          m += w_g.transpose() * w_g;
        }
        const RowMatrix r =
            Eigen::Map<const FloatRowMatrix>(rotations.value_rotation(layer, kv_head), d, d)
                .cast<double>();
        RowMatrix rotated = r.transpose() * m * r;
        rotated.diagonal().array() += damping * std::max(rotated.diagonal().mean(), 1e-30);
        const std::vector<float> factor =
            feedback_factor(std::span<const double>(rotated.data(), size_t(d * d)), d);
        std::copy(factor.begin(), factor.end(), factors.begin() + task * d * d);
      },
      true);
  return factors;
}

}  // namespace oscar
