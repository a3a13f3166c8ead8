// The weights hash that ties a rotations file to its model: the same for the same weights, loaded
// from anywhere; different for other weights of the same shapes, wherever in a tensor's sampled
// windows they differ; and the fingerprint carries the shapes the rotations must have.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "model/model_fingerprint.h"
#include "support/test_paths.h"

namespace oscar {
namespace {

TEST(ModelFingerprint, SameWeightsSameHashWhereverLoadedFrom) {
  const ModelWeights testbed = load_model(testing::testbed_model_dir());
  const ModelWeights copy = load_model(testing::copy_testbed_model("fingerprint-copy"));
  EXPECT_EQ(weights_hash(testbed), weights_hash(copy));
  EXPECT_EQ(weights_hash(testbed).size(), 16u);
  const ModelFingerprint f = model_fingerprint(testbed);
  EXPECT_EQ(f.name, testing::testbed_model_dir());
  EXPECT_EQ(f.num_layers, 8);
  EXPECT_EQ(f.num_kv_heads, 2);
  EXPECT_EQ(f.head_dim, 128);
  EXPECT_EQ(f.config_hash, testbed.config.config_hash);
  EXPECT_EQ(f.weights_hash, weights_hash(testbed));
}

TEST(ModelFingerprint, OtherWeightsOfTheSameShapesDiffer) {
  ModelConfig config = load_model_config(testing::testbed_model_dir() + "/config.json");
  config.num_layers = 2;
  const ModelWeights a = make_random_model(config, 1);
  EXPECT_EQ(weights_hash(a), weights_hash(make_random_model(config, 1)));
  EXPECT_NE(weights_hash(a), weights_hash(make_random_model(config, 2)));
  // One bf16 value changed at the start, in the eighth of the 16 windows of 4 KiB and at the end
  // of a large tensor, and in a small tensor, which is read whole.
  const TensorView& large = a.layers[1].gate_proj;
  ASSERT_GT(large.data.size(), size_t(64) << 10);
  const size_t in_eighth_window = ((large.data.size() - 4096) * 7 / 15 + 100) & ~size_t(1);
  const TensorView& small = a.layers[0].k_norm;
  for (const auto& [tensor, offset] : std::vector<std::pair<const TensorView*, size_t>>{
           {&large, 0}, {&large, in_eighth_window}, {&large, large.data.size() - 2}, {&small, 2}}) {
    ModelWeights changed = make_random_model(config, 1);
    const TensorView& target =
        tensor == &large ? changed.layers[1].gate_proj : changed.layers[0].k_norm;
    auto* bytes = const_cast<std::byte*>(target.data.data());  // the model's own buffer
    bytes[offset + 1] ^= std::byte{0x80};                      // the sign of a little-endian bf16
    EXPECT_NE(weights_hash(a), weights_hash(changed)) << target.name << " at byte " << offset;
  }
}

}  // namespace
}  // namespace oscar
