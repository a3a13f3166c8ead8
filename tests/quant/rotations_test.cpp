// Hadamard matrices, bit reversal, and the rotations file (round trip and refusals).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include <Eigen/Dense>

#include "format/safetensors.h"
#include "quant/hadamard.h"
#include "quant/kv_rotations.h"
#include "support/test_paths.h"
#include "util/error.h"

namespace oscar {
namespace {

TEST(Hadamard, IsSymmetricOrthogonalAndNormalised) {
  for (const int64_t n : {1, 2, 8, 64, 128}) {
    const auto h = hadamard_matrix(n);
    std::vector<float> as_float(h.begin(), h.end());
    EXPECT_LT(orthogonality_error(as_float.data(), n), 1e-6) << n;
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_DOUBLE_EQ(h[size_t(i)], 1.0 / std::sqrt(double(n)));  // first row constant
      for (int64_t j = 0; j < n; ++j) EXPECT_EQ(h[size_t(i * n + j)], h[size_t(j * n + i)]);
    }
  }
  // Hand-checked n = 4: rows ++++, +-+-, ++--, +--+ over 2.
  const auto h4 = hadamard_matrix(4);
  const double expected[16] = {1, 1, 1, 1, 1, -1, 1, -1, 1, 1, -1, -1, 1, -1, -1, 1};
  for (int i = 0; i < 16; ++i) EXPECT_DOUBLE_EQ(h4[size_t(i)], expected[i] / 2.0);
  EXPECT_THROW(hadamard_matrix(96), Error);
}

TEST(BitReverse, OrderForEightChannels) {
  const int64_t expected[8] = {0, 4, 2, 6, 1, 5, 3, 7};
  for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(bit_reverse(i, 3), expected[i]);
}

// The model the test files were "calibrated" on.
ModelFingerprint model(int64_t layers, int64_t heads, int64_t d) {
  return {"/models/a", layers, heads, d, "abc", "def"};
}

KvRotations random_rotations(int64_t layers, int64_t heads, int64_t d, bool per_head,
                             uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  KvRotations r;
  r.num_layers = layers;
  r.num_kv_heads = heads;
  r.head_dim = d;
  r.per_head = per_head;
  const int64_t count = layers * (per_head ? heads : 1);
  for (int64_t m = 0; m < 2 * count; ++m) {
    Eigen::MatrixXd a(d, d);
    for (int64_t i = 0; i < d * d; ++i) a.data()[i] = normal(rng);
    const Eigen::MatrixXd q = Eigen::HouseholderQR<Eigen::MatrixXd>(a).householderQ();
    auto& target = m < count ? r.key : r.value;
    for (int64_t i = 0; i < d; ++i)
      for (int64_t j = 0; j < d; ++j) target.push_back(float(q(i, j)));
  }
  r.key_eigenvalues.assign(size_t(count * d), 1.5f);
  r.value_eigenvalues.assign(size_t(count * d), 0.5f);
  record_model(model(layers, heads, d), r);
  return r;
}

TEST(RotationsFile, RoundTripsPerHeadAndPerLayer) {
  const std::string dir = testing::make_temp_dir("rotations");
  for (const bool per_head : {true, false}) {
    const KvRotations written = random_rotations(3, 2, 16, per_head, 5);
    const std::string path = dir + "/r.safetensors";
    save_kv_rotations(path, written);
    const KvRotations read = load_kv_rotations(path, model(3, 2, 16));
    EXPECT_EQ(read.per_head, per_head);
    EXPECT_EQ(read.key, written.key);
    EXPECT_EQ(read.value, written.value);
    EXPECT_EQ(read.key_eigenvalues, written.key_eigenvalues);
    EXPECT_EQ(*read.key_rotation(2, 1), *written.key_rotation(2, 1));
  }
}

void expect_refused(const std::string& path, const ModelFingerprint& expected,
                    const std::string& fragment) {
  try {
    load_kv_rotations(path, expected);
    ADD_FAILURE() << "accepted " << path << ", expected an error mentioning " << fragment;
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
  }
}

TEST(RotationsFile, RefusesBadFiles) {
  const std::string dir = testing::make_temp_dir("bad-rotations");
  const std::string path = dir + "/r.safetensors";
  KvRotations good = random_rotations(2, 2, 8, true, 9);
  save_kv_rotations(path, good);
  // Another model: each field that differs is named, and so are both models.
  ModelFingerprint other = model(2, 2, 8);
  other.name = "/models/b";
  other.weights_hash = "xyz";
  expect_refused(path, other, "(weights hash differs)");
  expect_refused(path, other,
                 "calibrated on /models/a (2 layers, 2 KV heads, head_dim 8, config hash abc, "
                 "weights hash def), not on /models/b");
  other.config_hash = "uvw";
  expect_refused(path, other, "(config hash, weights hash differ)");
  expect_refused(path, model(2, 2, 16), "(head_dim differs)");
  expect_refused(path, model(3, 2, 8), "(layer count differs)");
  expect_refused(path, model(2, 4, 8), "(KV head count differs)");
  // The model check reads the metadata alone.
  EXPECT_NO_THROW(check_rotations_model(path, model(2, 2, 8)));
  EXPECT_THROW(check_rotations_model(path, model(1, 2, 8)), Error);
  // A file that records the model's config but not its weights (an older `oscar calibrate`).
  KvRotations old = good;
  old.metadata.erase("model_weights_hash");
  save_kv_rotations(path, old);
  expect_refused(path, model(2, 2, 8), "no metadata 'model_weights_hash'");
  // Metadata that claims a model its tensors do not fit.
  KvRotations lying = good;
  record_model(model(3, 2, 8), lying);
  save_kv_rotations(path, lying);
  expect_refused(path, model(3, 2, 8), "layers.2.key.rotation");
  record_model(model(1, 2, 8), lying);
  save_kv_rotations(path, lying);
  expect_refused(path, model(1, 2, 8), "more than the model's 1 layers");

  KvRotations skewed = good;
  skewed.value[5] += 0.1f;
  save_kv_rotations(path, skewed);
  expect_refused(path, model(2, 2, 8), "not orthogonal");

  KvRotations nan = good;
  nan.key[17] = std::nanf("");
  save_kv_rotations(path, nan);
  expect_refused(path, model(2, 2, 8), "non-finite");

  write_safetensors(
      path, {make_f32_tensor("layers.0.key.rotation", {1, 8, 8}, std::vector<float>(64, 0.1f))},
      {});
  expect_refused(path, model(2, 2, 8), "not an oscar rotations file");
}

}  // namespace
}  // namespace oscar
