// The per-group asymmetric codec: error bounds, clipping, packing, parameter storage.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "quant/group_codec.h"
#include "util/half.h"

namespace oscar {
namespace {

std::vector<float> random_values(std::mt19937& rng, int count, float spread) {
  std::normal_distribution<float> normal(0.3f, spread);
  std::vector<float> values(static_cast<size_t>(count));
  for (float& v : values) v = normal(rng);
  return values;
}

struct CodecCase {
  int bits;
  int group;
  ParamFormat format;
};

class GroupCodec : public ::testing::TestWithParam<CodecCase> {};

TEST_P(GroupCodec, ErrorWithinHalfAStepWithoutClipping) {
  const CodecCase c = GetParam();
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const auto values = random_values(rng, c.group, 0.5f + float(trial % 7));
    const GroupParams params = choose_group_params(values, c.bits, {1.0f}, c.format);
    std::vector<uint8_t> codes(size_t(packed_bytes(c.group, c.bits)));
    quantize_group(values, params, c.bits, codes.data());
    std::vector<float> restored(values.size());
    dequantize_group(codes.data(), 0, c.group, params, c.bits, restored.data());
    // Half a step, plus what rounding scale and zero to 16 bits can shift the grid by.
    const float levels = float((1 << c.bits) - 1);
    // q8's zero sits on a grid of scale / 16, so it can shift the levels by scale / 32.
    const float slack = c.format == ParamFormat::q8 ? params.scale / 32.0f + 1e-6f
                        : c.format == ParamFormat::f32
                            ? 1e-5f * (std::abs(params.zero) + levels * params.scale)
                            : (c.format == ParamFormat::f16 ? 1e-3f : 8e-3f) *
                                  (std::abs(params.zero) + levels * params.scale);
    for (size_t i = 0; i < values.size(); ++i) {
      ASSERT_LE(std::abs(values[i] - restored[i]), 0.5f * params.scale + slack)
          << "trial " << trial << " element " << i;
    }
  }
}

TEST_P(GroupCodec, ClippingClampsOutliersIntoRange) {
  const CodecCase c = GetParam();
  std::mt19937 rng(11);
  auto values = random_values(rng, c.group, 1.0f);
  values[3] = 40.0f;  // an outlier channel
  const GroupParams clipped = choose_group_params(values, c.bits, {0.9f}, c.format);
  const GroupParams full = choose_group_params(values, c.bits, {1.0f}, c.format);
  EXPECT_LT(clipped.scale, full.scale);
  std::vector<uint8_t> codes(size_t(packed_bytes(c.group, c.bits)));
  quantize_group(values, clipped, c.bits, codes.data());
  EXPECT_EQ(code_at(codes.data(), 3, c.bits), (1 << c.bits) - 1);  // clamped to the top level
  std::vector<float> restored(values.size());
  dequantize_group(codes.data(), 0, c.group, clipped, c.bits, restored.data());
  EXPECT_NEAR(restored[3], 0.9f * 40.0f, 0.05f * 40.0f);
}

TEST_P(GroupCodec, PackedCodesRoundTrip) {
  const CodecCase c = GetParam();
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> code(0, (1 << c.bits) - 1);
  std::vector<int> expected(size_t(c.group));
  std::vector<float> values(size_t(c.group));
  const GroupParams params{0.5f, -1.0f};
  for (int i = 0; i < c.group; ++i) {
    expected[size_t(i)] = code(rng);
    values[size_t(i)] = params.zero + float(expected[size_t(i)]) * params.scale;
  }
  std::vector<uint8_t> packed(size_t(packed_bytes(c.group, c.bits)), 0xff);
  quantize_group(values, params, c.bits, packed.data());
  for (int i = 0; i < c.group; ++i)
    ASSERT_EQ(code_at(packed.data(), i, c.bits), expected[size_t(i)]);
  // Element i sits in byte i * bits / 8 at bit (i * bits) % 8 (the layout the kernels rely on).
  const int i = 5;
  const int bit = i * c.bits;
  EXPECT_EQ((packed[size_t(bit / 8)] >> (bit % 8)) & ((1 << c.bits) - 1), expected[size_t(i)]);
}

TEST_P(GroupCodec, ParamsSurviveStorage) {
  const CodecCase c = GetParam();
  // Parameters as choose_group_params makes them are stored exactly.
  const GroupParams params = params_for_range(-1.75f, 0.31f, c.bits, c.format);
  std::vector<uint8_t> stored(size_t(param_bytes_per_group(c.format)));
  store_params(params, c.format, stored.data());
  const GroupParams loaded = load_params(stored.data(), c.format);
  EXPECT_EQ(loaded.scale, params.scale);
  EXPECT_EQ(loaded.zero, params.zero);
  EXPECT_LE(params.zero, -1.75f + params.scale / 16);
  EXPECT_GE(params.zero + float((1 << c.bits) - 1) * params.scale, 0.31f - params.scale / 16);
}

INSTANTIATE_TEST_SUITE_P(
    Formats, GroupCodec,
    ::testing::Values(CodecCase{2, 64, ParamFormat::f16}, CodecCase{2, 128, ParamFormat::f16},
                      CodecCase{2, 32, ParamFormat::bf16}, CodecCase{4, 64, ParamFormat::f16},
                      CodecCase{4, 128, ParamFormat::bf16}, CodecCase{2, 64, ParamFormat::q8},
                      CodecCase{4, 128, ParamFormat::q8}, CodecCase{2, 128, ParamFormat::f32}),
    [](const auto& case_info) {
      return "int" + std::to_string(case_info.param.bits) + "_g" +
             std::to_string(case_info.param.group) + "_" +
             std::string(case_info.param.format == ParamFormat::f16    ? "f16"
                         : case_info.param.format == ParamFormat::bf16 ? "bf16"
                         : case_info.param.format == ParamFormat::f32  ? "f32"
                                                                       : "q8");
    });

TEST(GroupCodec, ClipSearchNeverDoesWorseThanAnyFixedRatio) {
  std::mt19937 rng(17);
  for (int trial = 0; trial < 100; ++trial) {
    auto values = random_values(rng, 64, 1.0f);
    values[size_t(trial % 64)] *= 6.0f;  // an outlier
    auto error_of = [&](GroupParams p) {
      std::vector<uint8_t> codes(16);
      quantize_group(values, p, 2, codes.data());
      std::vector<float> restored(64);
      dequantize_group(codes.data(), 0, 64, p, 2, restored.data());
      double e = 0;
      for (size_t i = 0; i < 64; ++i)
        e += double(values[i] - restored[i]) * (values[i] - restored[i]);
      return e;
    };
    const double searched = error_of(choose_group_params(values, 2, {1.0f, true}, ParamFormat::q8));
    for (int i = 0; i < kClipCandidateCount; ++i) {
      EXPECT_LE(
          searched,
          error_of(choose_group_params(values, 2, {clip_candidate(i)}, ParamFormat::q8)) + 1e-9);
    }
  }
}

TEST(GroupCodec, Q8CoversFarFromZeroGroups) {
  const std::vector<float> values = {100.0f, 101.0f, 102.5f, 100.2f};
  const GroupParams p = choose_group_params(values, 2, {1.0f}, ParamFormat::q8);
  std::vector<uint8_t> codes(1);
  quantize_group(values, p, 2, codes.data());
  std::vector<float> restored(4);
  dequantize_group(codes.data(), 0, 4, p, 2, restored.data());
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(restored[i], values[i], p.scale);
}

TEST(GroupCodec, ConstantGroupRestoresExactly) {
  const std::vector<float> values(64, 1.5f);
  const GroupParams params = choose_group_params(values, 2, {1.0f}, ParamFormat::f16);
  EXPECT_GT(params.scale, 0.0f);
  std::vector<uint8_t> codes(16);
  quantize_group(values, params, 2, codes.data());
  std::vector<float> restored(64);
  dequantize_group(codes.data(), 0, 64, params, 2, restored.data());
  for (const float v : restored) EXPECT_NEAR(v, 1.5f, 1e-3f);
}

}  // namespace
}  // namespace oscar
