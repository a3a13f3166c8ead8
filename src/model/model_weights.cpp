#include "model/model_weights.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>

#include "util/error.h"
#include "util/file_io.h"
#include "util/half.h"

namespace oscar {
namespace {

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  TensorView* target;
};

std::vector<TensorSpec> tensor_specs(ModelWeights& weights) {
  const ModelConfig& c = weights.config;
  std::vector<TensorSpec> specs;
  specs.push_back(
      {"model.embed_tokens.weight", {c.vocab_size, c.hidden_size}, &weights.embed_tokens});
  specs.push_back({"model.norm.weight", {c.hidden_size}, &weights.final_norm});
  if (!c.block.tie_word_embeddings) {
    specs.push_back({"lm_head.weight", {c.vocab_size, c.hidden_size}, &weights.lm_head});
  }
  weights.layers.resize(size_t(c.num_layers));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    LayerWeights& layer = weights.layers[size_t(i)];
    const std::string prefix = fmt::format("model.layers.{}.", i);
    specs.push_back({prefix + "input_layernorm.weight", {c.hidden_size}, &layer.input_norm});
    specs.push_back(
        {prefix + "self_attn.q_proj.weight", {c.q_dim(), c.hidden_size}, &layer.q_proj});
    specs.push_back(
        {prefix + "self_attn.k_proj.weight", {c.kv_dim(), c.hidden_size}, &layer.k_proj});
    specs.push_back(
        {prefix + "self_attn.v_proj.weight", {c.kv_dim(), c.hidden_size}, &layer.v_proj});
    specs.push_back(
        {prefix + "self_attn.o_proj.weight", {c.hidden_size, c.q_dim()}, &layer.o_proj});
    if (c.block.qk_norm) {
      specs.push_back({prefix + "self_attn.q_norm.weight", {c.head_dim}, &layer.q_norm});
      specs.push_back({prefix + "self_attn.k_norm.weight", {c.head_dim}, &layer.k_norm});
    }
    specs.push_back(
        {prefix + "post_attention_layernorm.weight", {c.hidden_size}, &layer.post_attention_norm});
    specs.push_back(
        {prefix + "mlp.gate_proj.weight", {c.intermediate_size, c.hidden_size}, &layer.gate_proj});
    specs.push_back(
        {prefix + "mlp.up_proj.weight", {c.intermediate_size, c.hidden_size}, &layer.up_proj});
    specs.push_back(
        {prefix + "mlp.down_proj.weight", {c.hidden_size, c.intermediate_size}, &layer.down_proj});
  }
  return specs;
}

void check_tensor(const TensorView& view, const TensorSpec& spec, const std::string& file) {
  require(view.dtype == DType::bf16 || view.dtype == DType::f16 || view.dtype == DType::f32,
          "{}: tensor {}: dtype {} is not supported (expected BF16, F16 or F32)", file, spec.name,
          dtype_name(view.dtype));
  require(view.shape == spec.shape, "{}: tensor {}: expected shape {}, found {}", file, spec.name,
          shape_to_string(spec.shape), shape_to_string(view.shape));
}

// Which file holds each tensor: one model.safetensors, or the shards of an index.
std::map<std::string, std::string> tensor_files(const std::string& model_dir) {
  const std::string single = model_dir + "/model.safetensors";
  const std::string index_path = model_dir + "/model.safetensors.index.json";
  std::map<std::string, std::string> files;
  if (file_exists(index_path)) {
    nlohmann::json index;
    try {
      index = nlohmann::json::parse(read_file(index_path));
    } catch (const nlohmann::json::exception& error) {
      fail("{}: not valid JSON: {}", index_path, error.what());
    }
    const auto map = index.is_object() ? index.find("weight_map") : index.end();
    require(map != index.end() && map->is_object(), "{}: missing object weight_map", index_path);
    for (const auto& [name, file] : map->items()) {
      require(file.is_string(), "{}: weight_map entry {} is not a file name", index_path, name);
      const std::string shard = file.get<std::string>();
      require(shard.find('/') == std::string::npos && shard.find("..") == std::string::npos,
              "{}: weight_map entry {} names a file outside the model directory: {}", index_path,
              name, shard);
      files[name] = model_dir + "/" + shard;
    }
    return files;
  }
  require(file_exists(single), "{}: no model.safetensors or model.safetensors.index.json",
          model_dir);
  return {{"", single}};  // "" = every tensor
}

}  // namespace

ModelWeights load_model(const std::string& model_dir) {
  ModelWeights weights;
  weights.config = load_model_config(model_dir + "/config.json");
  std::filesystem::path source = std::filesystem::absolute(model_dir).lexically_normal();
  weights.source = (source.has_filename() ? source : source.parent_path()).string();
  const auto locations = tensor_files(model_dir);
  std::map<std::string, const SafetensorsFile*> opened;
  auto open_file = [&](const std::string& path) {
    auto it = opened.find(path);
    if (it != opened.end()) return it->second;
    weights.files.push_back(SafetensorsFile::open(path));
    return opened[path] = weights.files.back().get();
  };
  for (const TensorSpec& spec : tensor_specs(weights)) {
    std::string path;
    if (const auto it = locations.find(""); it != locations.end()) {
      path = it->second;
    } else {
      const auto located = locations.find(spec.name);
      require(located != locations.end(),
              "{}/model.safetensors.index.json: tensor {} is not listed", model_dir, spec.name);
      path = located->second;
      require(file_exists(path),
              "{}/model.safetensors.index.json: tensor {} is listed in {}, "
              "which does not exist",
              model_dir, spec.name, path);
    }
    const SafetensorsFile* file = open_file(path);
    const TensorView* view = file->find(spec.name);
    require(view != nullptr, "{}: tensor {} is missing", path, spec.name);
    check_tensor(*view, spec, path);
    *spec.target = *view;
  }
  if (weights.config.block.tie_word_embeddings) weights.lm_head = weights.embed_tokens;
  return weights;
}

namespace {

// splitmix64: a counter-based generator, so every element is a pure function of (seed, tensor,
// index) and the tensor fills in parallel, identically for any thread count.
uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform on [-a, a] with a = std * sqrt(3), so the values have the requested standard deviation.
// Every operation rounds once in float32 (2 unit - 1 is exact, even as a fused multiply-add), so
// bench/prefill_peer.py regenerates the same values in PyTorch.
float uniform_value(uint64_t bits, float std) {
  const float unit = float(bits >> 40) * (1.0f / float(1ull << 24));  // [0, 1)
  return (2.0f * unit - 1.0f) * std * 1.7320508f;
}

// 1 + noise rounded once to float32: the sum is exact in double, so no compiler's contraction of
// the product into the sum (a fused multiply-add) can change it.
float norm_value(float noise) {
  return float(1.0 + double(noise));
}

}  // namespace

ModelWeights make_random_model(const ModelConfig& config, uint64_t seed) {
  ModelWeights weights;
  weights.config = config;
  weights.source = fmt::format("random weights, seed {}", seed);
  const auto specs = tensor_specs(weights);
  weights.owned_buffers.reserve(specs.size());
  uint64_t tensor_index = 0;
  for (const TensorSpec& spec : specs) {
    TensorView view;
    view.name = spec.name;
    view.dtype = DType::bf16;
    view.shape = spec.shape;
    const int64_t count = view.numel();
    auto& buffer = weights.owned_buffers.emplace_back(size_t(count) * 2);
    auto* values = reinterpret_cast<uint16_t*>(buffer.data());
    const bool is_norm = spec.shape.size() == 1;
    const uint64_t stream = splitmix64(seed ^ splitmix64(++tensor_index));
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count; ++i) {
      const float noise = uniform_value(splitmix64(stream + uint64_t(i)), is_norm ? 0.05f : 0.02f);
      values[i] = float_to_bf16(is_norm ? norm_value(noise) : noise);
    }
    view.data = std::span<const std::byte>(buffer.data(), buffer.size());
    *spec.target = view;
  }
  if (config.block.tie_word_embeddings) weights.lm_head = weights.embed_tokens;
  return weights;
}

}  // namespace oscar
