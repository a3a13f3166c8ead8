#include "model/value_rotation_folding.h"

#include <Eigen/Dense>

namespace oscar {
namespace {
using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using DoubleMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
}  // namespace

void fold_value_rotation(const ModelConfig& config, const KvRotations& rotations, int64_t layer,
                         float* v_proj, float* o_proj) {
  const int64_t d = config.head_dim;
  const int64_t hidden = config.hidden_size;
  const int64_t q_dim = config.q_dim();
  for (int64_t kv_head = 0; kv_head < config.num_kv_heads; ++kv_head) {
    // Products in double so the folded weights equal the exact rotation to float precision.
    const DoubleMatrix r =
        Eigen::Map<const RowMatrix>(rotations.value_rotation(layer, kv_head), d, d).cast<double>();
    Eigen::Map<RowMatrix> w_v(v_proj + kv_head * d * hidden, d, hidden);
    w_v = (r.transpose() * w_v.cast<double>()).cast<float>();
    for (int64_t g = 0; g < config.group_size(); ++g) {
      const int64_t head = kv_head * config.group_size() + g;
      Eigen::Map<RowMatrix, 0, Eigen::OuterStride<>> w_o(o_proj + head * d, hidden, d,
                                                         Eigen::OuterStride<>(q_dim));
      w_o = (w_o.cast<double>() * r).cast<float>();
    }
  }
}

}  // namespace oscar
