// Calibration on the testbed model: deterministic, orthogonal, equal to a brute-force reading of
// the method spec on the recorded activations, and better than Hadamard alone on held-out text.
#include <gtest/gtest.h>

#include "backend/activation_recorder.h"
#include "backend/backend.h"
#include "backend/sequence_runner.h"
#include "calibration/calibrate.h"
#include "calibration/calibration_observers.h"
#include "calibration/rotation_builder.h"
#include "format/documents.h"
#include "model/model_weights.h"
#include "support/test_paths.h"

namespace oscar {
namespace {

const ModelWeights& testbed() {
  static const ModelWeights weights = load_model(testing::testbed_model_dir());
  return weights;
}

std::vector<int32_t> byte_tokens(int document, size_t count) {
  static const auto documents = read_documents(testing::testbed_model_dir() + "/calib.xz");
  std::vector<int32_t> tokens;
  for (const unsigned char c : documents[size_t(document)]) {
    tokens.push_back(int32_t(c) + 100);
    if (tokens.size() == count) break;
  }
  return tokens;
}

std::unique_ptr<Backend> bf16_backend() {
  BackendOptions options;
  options.capacity = {16, 0};
  return make_backend(testbed(), options);
}

CalibrationResult run(bool per_head) {
  auto backend = bf16_backend();
  CalibrationOptions options;
  options.per_head = per_head;
  options.show_progress = false;
  options.chunk_tokens = 128;
  return calibrate(*backend, {byte_tokens(0, 256), byte_tokens(1, 256)}, byte_tokens(2, 128),
                   options);
}

TEST(Calibrate, IsDeterministicAndOrthogonal) {
  const CalibrationResult first = run(true);
  const CalibrationResult second = run(true);
  EXPECT_EQ(first.rotations.key, second.rotations.key);
  EXPECT_EQ(first.rotations.value, second.rotations.value);
  EXPECT_EQ(first.rotations.key_eigenvalues, second.rotations.key_eigenvalues);
  EXPECT_LT(first.max_orthogonality_error, 1e-5);
  EXPECT_EQ(first.calibration_tokens, 512);
  EXPECT_TRUE(first.rotations.per_head);
  EXPECT_EQ(first.rotations.key.size(), size_t(8 * 2 * 128 * 128));
}

TEST(Calibrate, PerLayerScopeSharesOneRotation) {
  const CalibrationResult result = run(false);
  EXPECT_FALSE(result.rotations.per_head);
  EXPECT_EQ(result.rotations.key.size(), size_t(8 * 128 * 128));
  EXPECT_EQ(result.rotations.key_rotation(3, 0), result.rotations.key_rotation(3, 1));
}

// The spec, computed the slow way from recorded activations of the same two sequences.
TEST(Calibrate, MatchesBruteForceCovariances) {
  const ModelConfig& config = testbed().config;
  auto backend = bf16_backend();
  ActivationRecorder recorder(config);
  const std::vector<std::vector<int32_t>> sequences = {byte_tokens(0, 256), byte_tokens(1, 256)};
  for (const auto& s : sequences)
    run_sequence(*backend, s, {.chunk_tokens = 128, .observer = &recorder});
  const int64_t layer = 5, kv_head = 1, d = config.head_dim, group = config.group_size();
  const int64_t tokens = recorder.tokens(layer);
  std::vector<double> c_q(size_t(d * d), 0.0), sigma_v(size_t(d * d), 0.0);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t g = 0; g < group; ++g) {
      const float* q =
          &recorder.queries(layer)[size_t((t * config.num_heads + kv_head * group + g) * d)];
      for (int64_t i = 0; i < d; ++i)
        for (int64_t j = 0; j < d; ++j)
          c_q[size_t(i * d + j)] += double(q[i]) * q[j] / double(tokens * group);
    }
  std::vector<double> w(static_cast<size_t>(tokens));
  double mean_w = 0;
  for (int64_t t = 0; t < tokens; ++t) {
    w[size_t(t)] = quadratic_form(
        &recorder.keys(layer)[size_t((t * config.num_kv_heads + kv_head) * d)], c_q, d);
    mean_w += w[size_t(t)] / double(tokens);
  }
  for (int64_t t = 0; t < tokens; ++t) {
    const float* v = &recorder.values(layer)[size_t((t * config.num_kv_heads + kv_head) * d)];
    for (int64_t i = 0; i < d; ++i)
      for (int64_t j = 0; j < d; ++j)
        sigma_v[size_t(i * d + j)] += w[size_t(t)] / mean_w * double(v[i]) * v[j] / double(tokens);
  }
  const CalibrationResult result = run(true);
  const SpectralRotation key = spectral_rotation(c_q, d);
  const SpectralRotation value = spectral_rotation(sigma_v, d);
  for (int64_t i = 0; i < d; ++i) {
    EXPECT_NEAR(result.rotations.key_eigenvalues[size_t((layer * 2 + kv_head) * d + i)],
                key.eigenvalues[size_t(i)], 1e-4 * key.eigenvalues[0]);
    EXPECT_NEAR(result.rotations.value_eigenvalues[size_t((layer * 2 + kv_head) * d + i)],
                value.eigenvalues[size_t(i)], 1e-4 * value.eigenvalues[0]);
  }
}

TEST(Calibrate, BeatsHadamardOnHeldOutLogits) {
  const CalibrationResult result = run(true);
  ASSERT_EQ(result.layers.size(), 8u);
  double oscar = 0, hadamard = 0;
  for (const auto& layer : result.layers) {
    oscar += layer.oscar_logits;
    hadamard += layer.hadamard_logits;
  }
  EXPECT_LT(oscar, hadamard);
}

}  // namespace
}  // namespace oscar
