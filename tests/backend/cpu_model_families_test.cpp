// Each model family's block on the CPU backend: a Mistral-shaped model with random weights runs
// through the Llama-shaped block its family describes (no q/k norm), and prefill in chunks and
// token-by-token decode agree.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/sequence_runner.h"
#include "model/model_weights.h"
#include "support/test_paths.h"

namespace oscar {
namespace {

// The family and block of models/hf-configs/<file>, at a size the test runs in a moment.
ModelConfig small_config(const std::string& file) {
  ModelConfig config = load_model_config(testing::source_dir() + "/models/hf-configs/" + file);
  config.num_layers = 2;
  config.hidden_size = 256;
  config.num_heads = 4;
  config.num_kv_heads = 2;
  config.head_dim = 64;
  config.intermediate_size = 512;
  config.vocab_size = 512;
  return config;
}

TEST(ModelFamilies, MistralBlockRunsOnTheCpuBackend) {
  const ModelWeights weights = make_random_model(small_config("mistral-7b-v0.3.json"), 5);
  ASSERT_FALSE(weights.config.block.qk_norm);
  EXPECT_TRUE(weights.layers[0].q_norm.data.empty());
  BackendOptions options;
  options.kv.dtype = KvDtype::f32;
  options.capacity = {64, 0};
  std::vector<int32_t> tokens;
  for (int32_t i = 0; i < 40; ++i) tokens.push_back((i * 37 + 11) % 512);
  CpuBackend chunked(weights, options, nullptr);
  CpuBackend one_by_one(weights, options, nullptr);
  const std::vector<float> a =
      run_sequence(chunked, tokens, {.chunk_tokens = 16, .all_logits = true});
  const std::vector<float> b =
      run_sequence(one_by_one, tokens, {.chunk_tokens = 1, .all_logits = true});
  ASSERT_EQ(a.size(), tokens.size() * 512);
  for (const float logit : a) ASSERT_TRUE(std::isfinite(logit));
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace oscar
