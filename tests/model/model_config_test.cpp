// config.json of every supported shape, and the errors a bad one gives.
#include <gtest/gtest.h>

#include <cmath>

#include "model/model_config.h"
#include "model/rope.h"
#include "support/test_paths.h"
#include "util/error.h"
#include "util/file_io.h"

namespace oscar {
namespace {

struct ShapeCase {
  const char* file;
  int64_t layers, heads, kv_heads, head_dim, hidden;
  bool tied;
  double published_parameters;  // billions, from the model cards
};

TEST(ModelConfig, HuggingFaceConfigsOfRealModels) {
  const ShapeCase cases[] = {
      {"qwen3-0.6b.json", 28, 16, 8, 128, 1024, true, 0.596},
      {"qwen3-4b-thinking-2507.json", 36, 32, 8, 128, 2560, true, 4.02},
      {"qwen3-8b.json", 36, 32, 8, 128, 4096, false, 8.19},
      {"qwen3-32b.json", 64, 64, 8, 128, 5120, false, 32.8},
      {"llama-3.1-8b.json", 32, 32, 8, 128, 4096, false, 8.03},
      {"llama-3.1-70b.json", 80, 64, 8, 128, 8192, false, 70.6},
      {"mistral-7b-v0.3.json", 32, 32, 8, 128, 4096, false, 7.25},
  };
  for (const ShapeCase& c : cases) {
    const ModelConfig config =
        load_model_config(testing::source_dir() + "/models/hf-configs/" + c.file);
    EXPECT_EQ(config.num_layers, c.layers) << c.file;
    EXPECT_EQ(config.num_heads, c.heads) << c.file;
    EXPECT_EQ(config.num_kv_heads, c.kv_heads) << c.file;
    EXPECT_EQ(config.head_dim, c.head_dim) << c.file;
    EXPECT_EQ(config.hidden_size, c.hidden) << c.file;
    EXPECT_EQ(config.block.tie_word_embeddings, c.tied) << c.file;
    EXPECT_NEAR(double(config.parameter_count()) / 1e9, c.published_parameters,
                0.01 * c.published_parameters)
        << c.file;
  }
  const ModelConfig llama =
      load_model_config(testing::source_dir() + "/models/hf-configs/llama-3.1-8b.json");
  EXPECT_TRUE(llama.block.rope_scaling.llama3);
  EXPECT_EQ(llama.block.rope_scaling.factor, 8.0);
  EXPECT_EQ(llama.block.rope_theta, 500000.0);
  EXPECT_FALSE(llama.block.qk_norm);
}

// Mistral is Llama's block under another class name: no q/k norm, head_dim from hidden_size, and
// a sliding window only where config.json leaves one on.
TEST(ModelConfig, MistralReadsAsLlamasBlockWithoutASlidingWindow) {
  const std::string path = testing::source_dir() + "/models/hf-configs/mistral-7b-v0.3.json";
  const ModelConfig mistral = load_model_config(path);
  EXPECT_EQ(mistral.architecture_name, "MistralForCausalLM");
  EXPECT_FALSE(mistral.block.qk_norm);
  EXPECT_FALSE(mistral.block.tie_word_embeddings);
  EXPECT_FALSE(mistral.block.rope_scaling.llama3);
  EXPECT_EQ(mistral.block.rope_theta, 1e6);
  EXPECT_EQ(mistral.block.rms_norm_eps, 1e-5);
  EXPECT_EQ(mistral.max_position_embeddings, 32768);
  EXPECT_EQ(mistral.vocab_size, 32768);
  const ModelConfig llama =
      load_model_config(testing::source_dir() + "/models/hf-configs/llama-3.1-8b.json");
  EXPECT_NE(mistral.config_hash, llama.config_hash);

  const std::string text = read_file(path);
  const std::string window = "\"sliding_window\": null";
  for (const std::string& replacement :
       {std::string("\"sliding_window\": 4096"), std::string("\"_\": 0")}) {
    std::string changed = text;
    changed.replace(changed.find(window), window.size(), replacement);
    try {
      parse_model_config_json(changed, "config.json");
      ADD_FAILURE() << "accepted: " << replacement;
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find("sliding_window"), std::string::npos)
          << error.what();
    }
  }
  std::string whole_context = text;
  whole_context.replace(whole_context.find(window), window.size(), "\"sliding_window\": 32768");
  EXPECT_EQ(parse_model_config_json(whole_context, "config.json").num_layers, 32);
}

TEST(ModelConfig, TestbedUsesRopeParameters) {
  const ModelConfig config = load_model_config(testing::testbed_model_dir() + "/config.json");
  EXPECT_EQ(config.block.rope_theta, 1e6);
  EXPECT_TRUE(config.block.qk_norm);
  EXPECT_EQ(config.group_size(), 4);
  EXPECT_EQ(config.eos_token_ids, std::vector<int64_t>{0});
  EXPECT_EQ(config.config_hash.size(), 16u);
}

TEST(ModelConfig, ErrorsNameTheField) {
  const std::string base = read_file(testing::testbed_model_dir() + "/config.json");
  struct Case {
    std::string from, to, fragment;
  };
  const Case cases[] = {
      {"Qwen3ForCausalLM", "GPT2LMHeadModel", "unsupported architecture GPT2LMHeadModel"},
      {"\"hidden_size\": 512", "\"hidden_size\": -3", "hidden_size"},
      {"\"num_hidden_layers\": 8,", "", "num_hidden_layers"},
      {"\"attention_bias\": false", "\"attention_bias\": true", "attention_bias"},
      {"\"rope_type\": \"default\"", "\"rope_type\": \"yarn\"", "yarn"},
      {"\"num_key_value_heads\": 2", "\"num_key_value_heads\": 3", "num_key_value_heads"},
      {"\"full_attention\",\n    \"full_attention\",\n    \"full_attention\"",
       "\"sliding_attention\",\n    \"full_attention\",\n    \"full_attention\"",
       "sliding_attention"},
  };
  for (const Case& c : cases) {
    std::string text = base;
    const size_t at = text.find(c.from);
    ASSERT_NE(at, std::string::npos) << c.from;
    text.replace(at, c.from.size(), c.to);
    try {
      parse_model_config_json(text, "config.json");
      ADD_FAILURE() << "accepted: " << c.to;
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find(c.fragment), std::string::npos) << error.what();
    }
  }
  EXPECT_THROW(parse_model_config_json("{not json", "config.json"), Error);
}

TEST(Rope, DefaultAndLlama3Frequencies) {
  const ModelConfig llama =
      load_model_config(testing::source_dir() + "/models/hf-configs/llama-3.1-8b.json");
  const auto frequencies = rope_inverse_frequencies(llama);
  ASSERT_EQ(frequencies.size(), 64u);
  // transformers _compute_llama3_parameters, by hand for three bands (theta 5e5, D 128):
  EXPECT_FLOAT_EQ(frequencies[0], 1.0f);  // wavelength 2*pi < 8192/4: high frequency, unchanged
  const double base_63 =
      1.0 / std::pow(500000.0, 126.0 / 128.0);  // wavelength > 8192: divided by 8
  EXPECT_NEAR(frequencies[63], base_63 / 8.0, 1e-6 * base_63);
  const double base_30 = 1.0 / std::pow(500000.0, 60.0 / 128.0);  // in the interpolated band
  const double wavelength = 2 * M_PI / base_30;
  ASSERT_TRUE(wavelength > 8192 / 4.0 && wavelength < 8192);
  const double smooth = (8192 / wavelength - 1.0) / (4.0 - 1.0);
  EXPECT_NEAR(frequencies[30], (1 - smooth) * base_30 / 8 + smooth * base_30, 1e-6 * base_30);

  std::vector<float> x = {1.0f, 2.0f, 3.0f, 4.0f};
  const float cos_values[2] = {0.6f, 0.0f}, sin_values[2] = {0.8f, 1.0f};
  apply_rope(x.data(), cos_values, sin_values, 4);
  // pairs (x0, x2) rotate by (0.6, 0.8); (x1, x3) by (0, 1)
  EXPECT_FLOAT_EQ(x[0], 1.0f * 0.6f - 3.0f * 0.8f);
  EXPECT_FLOAT_EQ(x[2], 3.0f * 0.6f + 1.0f * 0.8f);
  EXPECT_FLOAT_EQ(x[1], -4.0f);
  EXPECT_FLOAT_EQ(x[3], 2.0f);
}

}  // namespace
}  // namespace oscar
