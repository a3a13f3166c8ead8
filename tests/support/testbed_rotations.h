#pragma once
// A calibrated-looking rotations file for the testbed and the oscar method, written once per test
// program: random orthogonal matrices and a geometric query spectrum for the keys' error feedback;
// and the KV cache of a test case that uses it.
#include <Eigen/Dense>

#include <cmath>
#include <cstdlib>
#include <string>

#include "kvcache/kv_cache_config.h"
#include "model/model_fingerprint.h"
#include "quant/kv_rotations.h"
#include "support/test_paths.h"
#include "support/testbed.h"

namespace oscar::testing {

inline std::string testbed_random_rotations_file() {
  static const std::string path = [] {
    const ModelConfig& c = testbed_weights().config;
    KvRotations r;
    r.num_layers = c.num_layers;
    r.num_kv_heads = c.num_kv_heads;
    r.head_dim = c.head_dim;
    const int64_t d = c.head_dim;
    std::srand(7);
    for (int64_t i = 0; i < 2 * c.num_layers * c.num_kv_heads; ++i) {
      const Eigen::MatrixXd q =
          Eigen::HouseholderQR<Eigen::MatrixXd>(Eigen::MatrixXd::Random(d, d)).householderQ();
      auto& target = i % 2 == 0 ? r.key : r.value;
      for (int64_t a = 0; a < d; ++a)
        for (int64_t b = 0; b < d; ++b) target.push_back(float(q(a, b)));
    }
    // Query-covariance eigenvalues in decreasing order.
    for (int64_t i = 0; i < c.num_layers * c.num_kv_heads * d; ++i)
      r.key_eigenvalues.push_back(float(std::pow(0.95, i % d)));
    record_model(model_fingerprint(testbed_weights()), r);
    const std::string file = make_temp_dir("rotations") + "/rotations.safetensors";
    save_kv_rotations(file, r);
    return file;
  }();
  return path;
}

// A test case's KV cache on the testbed: `dtype` by `method` in groups of `group`, pages of 32, the
// given sink, recent window and band; OSCAR with the random rotations above and error feedback on
// keys and values, as `oscar` runs it by default.
inline KvCacheConfig testbed_test_kv(KvDtype dtype, KvMethod method, int group, int64_t band_tokens,
                                     int64_t sink_tokens, int64_t recent_tokens) {
  KvCacheConfig kv;
  kv.dtype = dtype;
  kv.method = method;
  kv.group_size = group;
  kv.sink_tokens = sink_tokens;
  kv.recent_tokens = recent_tokens;
  kv.page_size_tokens = 32;
  kv.band_tokens = band_tokens;
  if (method == KvMethod::oscar) {
    kv.rotations_path = testbed_random_rotations_file();
    kv.key_error_feedback = true;
    kv.value_error_feedback = true;
  }
  return kv;
}

}  // namespace oscar::testing
