// The published OSCAR quantizer: row-quantile clipping, plain min/max groups, Lloyd-Max codes, and
// f32 group parameters.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "quant/group_codec.h"
#include "quant/published_quantizer.h"

namespace oscar {
namespace {

struct QuantileCase {
  float ratio;
  int head_dim;
  int index;
};

TEST(RowQuantile, IndexIsIntOfRatioTimesHeadDim) {
  // The method document's examples (D = 128: keys 0.96 -> 122, values 0.92 -> 117), and the ends.
  for (const QuantileCase c : {QuantileCase{0.96f, 128, 122}, QuantileCase{0.92f, 128, 117},
                               QuantileCase{0.96f, 64, 61}, QuantileCase{0.84f, 128, 107},
                               QuantileCase{1.0f, 128, 127}, QuantileCase{0.001f, 128, 0}}) {
    EXPECT_EQ(row_quantile_index(c.ratio, c.head_dim), c.index) << c.ratio << " of " << c.head_dim;
  }
}

// A row whose magnitudes are 1..128 in a shuffled order with alternating signs: the threshold is
// index + 1, and every larger magnitude is clamped to it with its sign kept.
TEST(RowQuantile, ClampsEveryMagnitudeAboveTheThreshold) {
  for (const float ratio : {0.96f, 0.92f, 0.5f}) {
    std::vector<float> row(128);
    for (int i = 0; i < 128; ++i) row[size_t(i)] = float(i + 1) * (i % 2 == 0 ? 1.0f : -1.0f);
    std::shuffle(row.begin(), row.end(), std::mt19937(3));
    const std::vector<float> original = row;
    clamp_row_at_quantile(row, ratio);
    const float threshold = float(row_quantile_index(ratio, 128) + 1);
    for (size_t i = 0; i < row.size(); ++i) {
      const float expected = std::clamp(original[i], -threshold, threshold);
      EXPECT_EQ(row[i], expected) << "ratio " << ratio << " element " << i;
    }
  }
}

TEST(RowQuantile, ThenPlainMinMaxPerGroup) {
  // After the clamp, groups take scale = (max - min) / 3 and zero = min with no further clipping.
  std::vector<float> row(128);
  for (int i = 0; i < 128; ++i) row[size_t(i)] = float(i) - 40.0f;  // -40..87; |x| index 122 is 82
  clamp_row_at_quantile(row, 0.96f);
  EXPECT_EQ(*std::max_element(row.begin(), row.end()), 82.0f);
  std::vector<GroupParams> params(2);
  choose_row_params(row, 64, 2, ClipPolicy{}, ParamFormat::f32, params);
  EXPECT_EQ(params[0].zero, -40.0f);
  EXPECT_EQ(params[0].scale, 63.0f / 3.0f);  // -40..23
  EXPECT_EQ(params[1].zero, 24.0f);
  EXPECT_EQ(params[1].scale, 58.0f / 3.0f);  // 24..82 (83..87 clamped to 82)
}

TEST(F32Params, StoreAndLoadExactly) {
  const GroupParams params{0.123456789f, -3.14159265f};
  uint8_t bytes[8];
  store_params(params, ParamFormat::f32, bytes);
  const GroupParams loaded = load_params(bytes, ParamFormat::f32);
  EXPECT_EQ(loaded.scale, params.scale);
  EXPECT_EQ(loaded.zero, params.zero);
  EXPECT_EQ(param_bytes_per_group(ParamFormat::f32), 8);
}

struct LloydMaxCase {
  ParamFormat format;
  int group_size;
};

// Codes follow the thresholds mean + {-0.981, 0, 0.981} standard deviations; the stored grid is
// centred on the mean with a scale of 1.16 standard deviations; quantize_group recovers the codes
// from the dequantized values.
TEST(LloydMax, CodesByThresholdsAndAUniformEquivalentGrid) {
  for (const LloydMaxCase c :
       {LloydMaxCase{ParamFormat::f32, 128}, LloydMaxCase{ParamFormat::f32, 64},
        LloydMaxCase{ParamFormat::f16, 128}, LloydMaxCase{ParamFormat::q8, 128}}) {
    std::mt19937 rng(5);
    std::normal_distribution<float> normal(0.7f, 2.0f);
    std::vector<float> row(128);
    for (float& x : row) x = normal(rng);
    double mean = 0, squares = 0;
    for (const float x : row) mean += x;
    mean /= 128.0;
    for (const float x : row) squares += (x - mean) * (x - mean);
    const double deviation = std::sqrt(squares / 128.0);
    std::vector<GroupParams> params(size_t(128 / c.group_size));
    std::vector<float> dequantized(128);
    lloyd_max_row(row, c.format, params, dequantized);
    if (c.format == ParamFormat::f32) {
      EXPECT_NEAR(params[0].scale, kLloydMaxScaleRatio * deviation, 1e-5 * deviation);
      EXPECT_NEAR(params[0].zero + 1.5 * params[0].scale, mean, 1e-5 * deviation);
    }
    int seen[4] = {};
    for (size_t i = 0; i < row.size(); ++i) {
      const double z = (row[i] - mean) / deviation;
      const int expected = z < -kLloydMaxThreshold ? 0 : z < 0 ? 1 : z < kLloydMaxThreshold ? 2 : 3;
      const GroupParams p = params[i / size_t(c.group_size)];
      ASSERT_EQ(quantize_code(dequantized[i], p, 2), expected) << "element " << i;
      ++seen[expected];
    }
    for (const int count : seen) EXPECT_GT(count, 10);  // every code is used on a Gaussian row
  }
}

}  // namespace
}  // namespace oscar
