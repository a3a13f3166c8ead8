// The CPU backend under the decode rule: prefill in any chunking, token-by-token decode and a full
// re-forward all give bit-identical logits, for every KV format; and folding the value rotation
// into the weights changes nothing but rounding.
#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <algorithm>
#include <random>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/sequence_runner.h"
#include "format/tensor.h"
#include "model/model_weights.h"
#include "model/value_error_feedback.h"
#include "model/value_rotation_folding.h"
#include "quant/kv_rotations.h"
#include "support/logit_checks.h"
#include "support/test_paths.h"
#include "util/error.h"

namespace oscar {
namespace {

const ModelWeights& testbed() {
  static const ModelWeights weights = load_model(testing::testbed_model_dir());
  return weights;
}

std::vector<float> run(Backend& backend, const std::vector<int32_t>& tokens, size_t chunk) {
  return run_sequence(backend, tokens, {.chunk_tokens = int64_t(chunk), .all_logits = true});
}

struct FormatCase {
  const char* name;
  KvDtype dtype;
  KvMethod method;
  int group;
  int64_t band_tokens = 0;
};

class DecodeRule : public ::testing::TestWithParam<FormatCase> {};

TEST_P(DecodeRule, ChunkingAndDecodeAgree) {
  const FormatCase f = GetParam();
  BackendOptions options;
  options.kv.dtype = f.dtype;
  options.kv.method = f.method;
  options.kv.group_size = f.group;
  options.kv.sink_tokens = 16;
  options.kv.recent_tokens = 48;
  options.kv.page_size_tokens = 32;
  options.kv.band_tokens = f.band_tokens;
  options.capacity = {64, 64, 64};
  auto backend = make_backend(testbed(), options);
  // Past sink + window (64 tokens), so every format quantizes and migrates (and, with a band of
  // 40, reads 2-bit codes from position 104 on).
  const auto tokens = testing::validation_byte_tokens(testing::kSanitized ? 100 : 200);
  const auto whole = run(*backend, tokens, tokens.size());
  const auto chunked = run(*backend, tokens, 37);
  const auto decoded = run(*backend, tokens, 1);
  // Batch-invariant math (backend/cpu/simd.h): not close, identical.
  EXPECT_EQ(testing::max_relative_difference(whole, chunked), 0.0) << f.name;
  EXPECT_EQ(testing::max_relative_difference(whole, decoded), 0.0) << f.name;
}

INSTANTIATE_TEST_SUITE_P(
    Formats, DecodeRule,
    ::testing::Values(FormatCase{"f32", KvDtype::f32, KvMethod::naive, 128},
                      FormatCase{"bf16", KvDtype::bf16, KvMethod::naive, 128},
                      FormatCase{"int2_naive", KvDtype::int2, KvMethod::naive, 64},
                      FormatCase{"int2_quarot", KvDtype::int2, KvMethod::quarot, 128},
                      FormatCase{"int2_kivi", KvDtype::int2, KvMethod::kivi, 32},
                      FormatCase{"int4_quarot", KvDtype::int4, KvMethod::quarot, 64},
                      FormatCase{"int2_quarot_band", KvDtype::int2, KvMethod::quarot, 64, 40}),
    [](const auto& case_info) { return std::string(case_info.param.name); });

TEST(DecodeRule, QuantizationChangesLogitsOnlyBeyondTheWindow) {
  BackendOptions exact;
  exact.kv.dtype = KvDtype::f32;
  exact.capacity = {64, 0};
  BackendOptions int2 = exact;
  int2.kv.dtype = KvDtype::int2;
  int2.kv.sink_tokens = 16;
  int2.kv.recent_tokens = 48;
  int2.kv.page_size_tokens = 32;
  int2.capacity = {64, 64};
  const auto tokens = testing::validation_byte_tokens(120);
  const auto reference = run(*make_backend(testbed(), exact), tokens, tokens.size());
  const auto quantized = run(*make_backend(testbed(), int2), tokens, tokens.size());
  const size_t vocab = size_t(testbed().config.vocab_size);
  // Positions < sink + window see no quantized token (bf16 rounding only); later ones do.
  const std::vector<float> early_ref(reference.begin(), reference.begin() + 64 * long(vocab));
  const std::vector<float> early_q(quantized.begin(), quantized.begin() + 64 * long(vocab));
  EXPECT_LT(testing::max_relative_difference(early_ref, early_q), 2e-2);
  EXPECT_GT(testing::max_relative_difference(reference, quantized), 2e-2);
}

// The band is an INT4 cache of the band's format over the positions it covers: while a query's
// quantized tokens all lie in the band its logits are those of that INT4 cache, bit for bit; once
// older tokens fall behind the band (their 2-bit codes are read) they are not.
TEST(DecodeRule, BandReadsTheFourBitCopies) {
  BackendOptions banded;
  banded.kv.dtype = KvDtype::int2;
  banded.kv.method = KvMethod::quarot;
  banded.kv.group_size = 64;
  banded.kv.sink_tokens = 16;
  banded.kv.recent_tokens = 48;
  banded.kv.band_tokens = 40;
  banded.kv.page_size_tokens = 32;
  banded.capacity = {64, 64, 64};
  BackendOptions int4 = banded;
  int4.kv = banded.kv.band_config();
  BackendOptions int2 = banded;
  int2.kv.band_tokens = 0;
  const auto tokens = testing::validation_byte_tokens(160);
  const auto with_band = run(*make_backend(testbed(), banded), tokens, 23);
  const auto reference = run(*make_backend(testbed(), int4), tokens, 23);
  const auto without_band = run(*make_backend(testbed(), int2), tokens, 23);
  const long vocab = long(testbed().config.vocab_size);
  auto rows = [&](const std::vector<float>& logits, long begin, long end) {
    return std::vector<float>(logits.begin() + begin * vocab, logits.begin() + end * vocab);
  };
  // Position t reads 2-bit codes iff band_begin(t + 1) > sink: t + 1 - 48 - 40 > 16, t >= 104.
  ASSERT_EQ(band_begin(banded.kv, 104), 16);
  ASSERT_EQ(band_begin(banded.kv, 105), 17);
  EXPECT_EQ(testing::max_relative_difference(rows(with_band, 0, 104), rows(reference, 0, 104)),
            0.0);
  EXPECT_GT(testing::max_relative_difference(rows(with_band, 104, 160), rows(reference, 104, 160)),
            1e-4);
  // Where the band is read (positions 65-103 see quantized tokens) it differs from INT2 alone.
  EXPECT_GT(testing::max_relative_difference(rows(with_band, 70, 104), rows(without_band, 70, 104)),
            1e-3);
}

KvRotations random_rotations(const ModelConfig& config, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  KvRotations r;
  r.num_layers = config.num_layers;
  r.num_kv_heads = config.num_kv_heads;
  r.head_dim = config.head_dim;
  const int64_t d = config.head_dim;
  for (int64_t m = 0; m < 2 * config.num_layers * config.num_kv_heads; ++m) {
    Eigen::MatrixXd a(d, d);
    for (int64_t i = 0; i < d * d; ++i) a.data()[i] = normal(rng);
    const Eigen::MatrixXd q = Eigen::HouseholderQR<Eigen::MatrixXd>(a).householderQ();
    auto& target = m < config.num_layers * config.num_kv_heads ? r.key : r.value;
    for (int64_t i = 0; i < d; ++i)
      for (int64_t j = 0; j < d; ++j) target.push_back(float(q(i, j)));
  }
  return r;
}

TEST(ValueRotationFolding, FoldedModelGivesTheSameLogits) {
  BackendOptions options;
  options.kv.dtype = KvDtype::f32;
  options.capacity = {64, 0};
  const KvRotations rotations = random_rotations(testbed().config, 17);
  CpuBackend plain(testbed(), options, nullptr);
  CpuBackend folded(testbed(), options, &rotations);
  const auto tokens = testing::validation_byte_tokens(150);
  EXPECT_LT(testing::max_relative_difference(run(plain, tokens, 64), run(folded, tokens, 64)),
            2e-5);
}

// The values' factor G (model/value_error_feedback.h) against the output projection as the model
// runs it, folded: G (M + damping) G^T is diagonal for M = sum over the group's query heads of
// W_g^T W_g, W_g the head's columns of the folded W_o.
TEST(ValueErrorFeedback, FactorDecorrelatesTheFoldedOutputProjection) {
  const ModelConfig& config = testbed().config;
  const KvRotations rotations = random_rotations(config, 23);
  const std::vector<float> factors = value_feedback_factors(testbed(), rotations);
  const int64_t d = config.head_dim, layer = 1, kv_head = config.num_kv_heads - 1;
  ASSERT_EQ(int64_t(factors.size()), config.num_layers * config.num_kv_heads * d * d);
  std::vector<float> v_proj = to_float_vector(testbed().layers[size_t(layer)].v_proj);
  std::vector<float> o_proj = to_float_vector(testbed().layers[size_t(layer)].o_proj);
  fold_value_rotation(config, rotations, layer, v_proj.data(), o_proj.data());
  Eigen::MatrixXd m = Eigen::MatrixXd::Zero(d, d);
  for (int64_t g = 0; g < config.group_size(); ++g) {
    Eigen::MatrixXd w(config.hidden_size, d);
    const int64_t first_column = (kv_head * config.group_size() + g) * d;
    for (int64_t r = 0; r < config.hidden_size; ++r)
      for (int64_t c = 0; c < d; ++c)
        w(r, c) = o_proj[size_t(r * config.q_dim() + first_column + c)];
    m += w.transpose() * w;
  }
  m.diagonal().array() += kValueFeedbackDamping * m.diagonal().mean();
  Eigen::MatrixXd g(d, d);
  const float* factor = &factors[size_t((layer * config.num_kv_heads + kv_head) * d * d)];
  for (int64_t j = 0; j < d; ++j) {
    for (int64_t l = 0; l < d; ++l) g(j, l) = factor[j * d + l];
    EXPECT_EQ(g(j, j), 1.0);
    for (int64_t l = 0; l < j; ++l) EXPECT_EQ(g(j, l), 0.0);
  }
  const Eigen::MatrixXd p = g * m * g.transpose();
  double worst = 0;
  for (int64_t j = 0; j < d; ++j)
    for (int64_t l = 0; l < d; ++l)
      if (l != j) worst = std::max(worst, std::abs(p(j, l)) / std::sqrt(p(j, j) * p(l, l)));
  EXPECT_LT(worst, 1e-3);
}

// A tensor-parallel rank computes only its KV heads' factors: the same values as the whole model's.
TEST(ValueErrorFeedback, AKvHeadRangeGivesThoseHeadsFactors) {
  const ModelConfig& config = testbed().config;
  ASSERT_GE(config.num_kv_heads, 2);
  const KvRotations rotations = random_rotations(config, 29);
  const std::vector<float> all = value_feedback_factors(testbed(), rotations);
  const std::vector<float> last = value_feedback_factors(testbed(), rotations, {1, 1});
  const int64_t d = config.head_dim, block = d * d;
  ASSERT_EQ(int64_t(last.size()), config.num_layers * block);
  for (int64_t layer = 0; layer < config.num_layers; ++layer) {
    const auto expected = all.begin() + (layer * config.num_kv_heads + 1) * block;
    EXPECT_TRUE(std::equal(expected, expected + block, last.begin() + layer * block))
        << "layer " << layer;
  }
  EXPECT_THROW(value_feedback_factors(testbed(), rotations, {1, config.num_kv_heads}), Error);
}

}  // namespace
}  // namespace oscar
