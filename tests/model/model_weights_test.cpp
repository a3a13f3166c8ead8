// Loading weights: the testbed, corrupted copies of it, shards, and random benchmark weights.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "model/model_weights.h"
#include "support/test_paths.h"
#include "util/error.h"
#include "util/file_io.h"

namespace oscar {
namespace {

namespace fs = std::filesystem;

std::string copy_testbed(const std::string& label) {
  const std::string dir = testing::make_temp_dir(label);
  fs::copy_file(testing::testbed_model_dir() + "/config.json", dir + "/config.json");
  fs::copy_file(testing::testbed_model_dir() + "/model.safetensors", dir + "/model.safetensors");
  return dir;
}

void expect_error(const std::string& dir, const std::vector<std::string>& fragments) {
  try {
    load_model(dir);
    ADD_FAILURE() << "loaded " << dir;
  } catch (const Error& error) {
    for (const auto& fragment : fragments) {
      EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
    }
  }
}

// Rewrites the safetensors header with `edit` applied to its JSON text (same length padding).
void edit_header(const std::string& path, const std::string& from, const std::string& to) {
  std::string bytes = read_file(path);
  uint64_t length = 0;
  std::memcpy(&length, bytes.data(), 8);
  std::string header = bytes.substr(8, length);
  const size_t at = header.find(from);
  ASSERT_NE(at, std::string::npos) << from;
  header.replace(at, from.size(), to);
  header.resize(length, ' ');
  bytes.replace(8, length, header);
  std::ofstream(path, std::ios::binary) << bytes;
}

TEST(ModelWeights, LoadsTheTestbed) {
  const ModelWeights w = load_model(testing::testbed_model_dir());
  ASSERT_EQ(w.layers.size(), 8u);
  EXPECT_EQ(w.layers[3].q_proj.shape, (std::vector<int64_t>{1024, 512}));
  EXPECT_EQ(w.layers[3].k_norm.shape, (std::vector<int64_t>{128}));
  EXPECT_EQ(w.lm_head.data.data(), w.embed_tokens.data.data());  // tied
}

TEST(ModelWeights, CorruptedDirectoriesNameFileAndTensor) {
  const std::string truncated = copy_testbed("truncated");
  fs::resize_file(truncated + "/model.safetensors", 4 << 20);
  expect_error(truncated, {"model.safetensors", "truncated"});

  const std::string reshaped = copy_testbed("reshaped");
  edit_header(reshaped + "/model.safetensors",
              "\"model.layers.2.self_attn.k_proj.weight\":{\"dtype\":\"BF16\",\"shape\":[256,512]",
              "\"model.layers.2.self_attn.k_proj.weight\":{\"dtype\":\"BF16\",\"shape\":[512,256]");
  expect_error(reshaped, {"model.safetensors", "model.layers.2.self_attn.k_proj.weight",
                          "[256, 512]", "[512, 256]"});

  const std::string renamed = copy_testbed("renamed");
  edit_header(renamed + "/model.safetensors", "model.layers.7.mlp.up_proj.weight",
              "model.layers.7.mlp.up_proj.weighs");
  expect_error(renamed, {"model.layers.7.mlp.up_proj.weight", "missing"});

  const std::string no_config = copy_testbed("no-config");
  fs::remove(no_config + "/config.json");
  expect_error(no_config, {"config.json"});

  const std::string sharded = copy_testbed("sharded");
  fs::rename(sharded + "/model.safetensors", sharded + "/model-00001-of-00002.safetensors");
  std::ofstream(sharded + "/model.safetensors.index.json")
      << R"({"weight_map": {"model.embed_tokens.weight": "model-00002-of-00002.safetensors"}})";
  expect_error(sharded, {"model-00002-of-00002.safetensors"});  // the shard it names is missing
  std::ofstream(sharded + "/model.safetensors.index.json")
      << R"({"weight_map": {"model.embed_tokens.weight": "model-00001-of-00002.safetensors"}})";
  expect_error(sharded, {"model.norm.weight", "not listed"});
  std::ofstream(sharded + "/model.safetensors.index.json")
      << R"({"weight_map": {"model.embed_tokens.weight": "../escape.safetensors"}})";
  expect_error(sharded, {"outside the model directory"});
}

TEST(ModelWeights, ShardedCheckpointLoads) {
  const std::string dir = copy_testbed("shards");
  fs::rename(dir + "/model.safetensors", dir + "/model-00001-of-00001.safetensors");
  const ModelWeights single = load_model(testing::testbed_model_dir());
  std::string index = R"({"metadata": {}, "weight_map": {)";
  for (const auto& tensor : single.files[0]->tensors()) {
    index += "\"" + tensor.name + "\": \"model-00001-of-00001.safetensors\",";
  }
  index.back() = '}';
  index += "}";
  std::ofstream(dir + "/model.safetensors.index.json") << index;
  const ModelWeights sharded = load_model(dir);
  EXPECT_EQ(sharded.layers.size(), 8u);
  EXPECT_TRUE(std::equal(sharded.layers[5].o_proj.data.begin(), sharded.layers[5].o_proj.data.end(),
                         single.layers[5].o_proj.data.begin()));
}

TEST(ModelWeights, RandomWeightsAtRealShapes) {
  // Qwen3-0.6B's tensor shapes; two of its 28 layers keep the test quick.
  ModelConfig config =
      load_model_config(testing::source_dir() + "/models/hf-configs/qwen3-0.6b.json");
  config.num_layers = 2;
  const ModelWeights a = make_random_model(config, 1);
  const ModelWeights b = make_random_model(config, 1);
  const ModelWeights c = make_random_model(config, 2);
  ASSERT_EQ(a.layers.size(), 2u);
  EXPECT_EQ(a.layers[1].gate_proj.shape, (std::vector<int64_t>{3072, 1024}));
  EXPECT_EQ(a.embed_tokens.shape, (std::vector<int64_t>{151936, 1024}));
  const auto& ta = a.layers[1].v_proj.data;
  EXPECT_TRUE(std::equal(ta.begin(), ta.end(), b.layers[1].v_proj.data.begin()));
  EXPECT_FALSE(std::equal(ta.begin(), ta.end(), c.layers[1].v_proj.data.begin()));
  const auto values = to_float_vector(a.layers[1].v_proj);
  size_t zeros = 0;
  double sum_squares = 0;
  for (const float v : values) {
    zeros += v == 0.0f;
    sum_squares += double(v) * v;
  }
  EXPECT_LT(zeros, values.size() / 100);
  EXPECT_NEAR(std::sqrt(sum_squares / double(values.size())), 0.02, 0.002);
}

// bench/prefill_peer.py regenerates these weights in PyTorch and checks the same values at start-up
// (TEST_VECTOR there): a change of the generator must change both. Seed 1, a Qwen3 layout (q/k
// norms, untied LM head) at small shapes; a value depends on the seed, the tensor's place in the
// checkpoint order and the element's index, not on the shapes.
TEST(ModelWeights, RandomWeightsMatchThePeerScriptsTestVector) {
  ModelConfig config =
      load_model_config(testing::source_dir() + "/models/hf-configs/qwen3-8b.json");
  config.vocab_size = 64;
  config.hidden_size = 32;
  config.intermediate_size = 48;
  config.num_heads = 2;
  config.num_kv_heads = 1;
  config.head_dim = 16;
  config.num_layers = 2;
  const ModelWeights weights = make_random_model(config, 1);
  struct Expected {
    const TensorView* tensor;
    std::vector<int64_t> indices;
    std::vector<uint16_t> bits;
  };
  const std::vector<Expected> expected = {
      {&weights.embed_tokens, {0, 1, 2, 1000}, {0xbc34, 0xbb89, 0x3d09, 0xbce8}},
      {&weights.final_norm, {0, 1, 2, 20}, {0x3f81, 0x3f86, 0x3f83, 0x3f80}},
      {&weights.lm_head, {0, 1, 2, 1000}, {0xbc3d, 0x3cbc, 0xbc80, 0x3b57}},
      {&weights.layers[0].input_norm, {0, 1, 2, 20}, {0x3f70, 0x3f8b, 0x3f72, 0x3f6f}},
      {&weights.layers[0].q_proj, {0, 1, 2, 1000}, {0x3c25, 0x3cee, 0x3d02, 0xba67}},
      {&weights.layers[1].down_proj, {0, 1, 2, 1000}, {0xbcb0, 0x3cc7, 0x3b0f, 0x3c7b}},
  };
  for (const Expected& e : expected) {
    const auto* bits = reinterpret_cast<const uint16_t*>(e.tensor->data.data());
    for (size_t i = 0; i < e.indices.size(); ++i) {
      EXPECT_EQ(bits[e.indices[i]], e.bits[i]) << e.tensor->name << "[" << e.indices[i] << "]";
    }
  }
}

}  // namespace
}  // namespace oscar
