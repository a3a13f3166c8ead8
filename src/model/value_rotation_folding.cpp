#include "model/value_rotation_folding.h"

#include <Eigen/Dense>

#include "util/parallel.h"

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
  const int64_t group = config.group_size();
  // A task per KV head's rows of W_v and per query head's columns of W_o: disjoint blocks, each
  // folded whole by one thread, so the result does not depend on the thread count.
  parallel_for(
      0, config.num_kv_heads * (1 + group),
      [&](int64_t task) {
        const int64_t kv_head = task / (1 + group), part = task % (1 + group);
        // Products in double so the folded weights equal the exact rotation to float precision.
        const DoubleMatrix r =
            Eigen::Map<const RowMatrix>(rotations.value_rotation(layer, kv_head), d, d)
                .cast<double>();
        if (part == 0) {
          Eigen::Map<RowMatrix> w_v(v_proj + kv_head * d * hidden, d, hidden);
          w_v = (r.transpose() * w_v.cast<double>()).cast<float>();
          return;
        }
        const int64_t head = kv_head * group + part - 1;
        Eigen::Map<RowMatrix, 0, Eigen::OuterStride<>> w_o(o_proj + head * d, hidden, d,
                                                           Eigen::OuterStride<>(q_dim));
        w_o = (w_o.cast<double>() * r).cast<float>();
      },
      true);
}

}  // namespace oscar
