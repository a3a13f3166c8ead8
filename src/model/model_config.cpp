#include "model/model_config.h"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "util/error.h"
#include "util/file_io.h"
#include "util/hash.h"

namespace oscar {
namespace {

using nlohmann::json;

class ConfigReader {
 public:
  ConfigReader(const json& root, const std::string& source) : root_(root), source_(source) {}

  int64_t positive_int(const char* key) const {
    const json* field = find(key);
    require(field != nullptr, "{}: missing field {}", source_, key);
    require(field->is_number_integer() && field->get<int64_t>() > 0,
            "{}: field {} must be a positive integer, found {}", source_, key, field->dump());
    return field->get<int64_t>();
  }

  int64_t positive_int_or(const char* key, int64_t fallback) const {
    const json* field = find(key);
    return field == nullptr || field->is_null() ? fallback : positive_int(key);
  }

  double positive_number(const json& field, const char* key) const {
    require(field.is_number() && field.get<double>() > 0,
            "{}: field {} must be a positive number, found {}", source_, key, field.dump());
    return field.get<double>();
  }

  bool boolean_or(const char* key, bool fallback) const {
    const json* field = find(key);
    if (field == nullptr || field->is_null()) return fallback;
    require(field->is_boolean(), "{}: field {} must be true or false, found {}", source_, key,
            field->dump());
    return field->get<bool>();
  }

  const json* find(const char* key) const {
    const auto it = root_.find(key);
    return it == root_.end() ? nullptr : &*it;
  }

  const std::string& source() const { return source_; }

 private:
  const json& root_;
  const std::string& source_;
};

const ModelFamily& parse_family(const ConfigReader& reader, std::string* name) {
  const json* architectures = reader.find("architectures");
  require(architectures != nullptr && architectures->is_array() && !architectures->empty() &&
              (*architectures)[0].is_string(),
          "{}: missing field architectures (a list naming the model class)", reader.source());
  *name = (*architectures)[0].get<std::string>();
  try {
    return find_model_family(*name);
  } catch (const Error& error) {
    fail("{}: architectures: {}", reader.source(), error.what());
  }
}

// rope_theta sits at the top level (transformers 4) or under rope_parameters (transformers 5);
// the scaling rule sits under rope_scaling (4) or rope_parameters (5).
void parse_rope(const ConfigReader& reader, ModelConfig& config) {
  const json* parameters = reader.find("rope_parameters");
  const json* scaling = reader.find("rope_scaling");
  const char* scaling_field = "rope_scaling";
  if (parameters != nullptr && !parameters->is_null()) {
    require(parameters->is_object(), "{}: rope_parameters must be an object", reader.source());
    if (const auto theta = parameters->find("rope_theta"); theta != parameters->end()) {
      config.block.rope_theta = reader.positive_number(*theta, "rope_parameters.rope_theta");
    }
    if (scaling == nullptr || scaling->is_null()) {
      scaling = parameters;
      scaling_field = "rope_parameters";
    }
  }
  if (const json* theta = reader.find("rope_theta"); theta != nullptr && !theta->is_null()) {
    config.block.rope_theta = reader.positive_number(*theta, "rope_theta");
  }
  if (scaling == nullptr || scaling->is_null()) return;
  require(scaling->is_object(), "{}: {} must be an object", reader.source(), scaling_field);
  std::string type = "default";
  const char* type_key = "rope_type";
  for (const char* key : {"rope_type", "type"}) {
    if (const auto it = scaling->find(key); it != scaling->end() && it->is_string()) {
      type = it->get<std::string>();
      type_key = key;
      break;
    }
  }
  if (type == "default") return;
  require(type == "llama3", "{}: {}.{}: RoPE scaling type {} is not supported (default, llama3)",
          reader.source(), scaling_field, type_key, type);
  auto number = [&](const char* key) {
    const auto it = scaling->find(key);
    require(it != scaling->end(), "{}: rope_scaling of type llama3 lacks {}", reader.source(), key);
    return reader.positive_number(*it, key);
  };
  config.block.rope_scaling.llama3 = true;
  config.block.rope_scaling.factor = number("factor");
  config.block.rope_scaling.low_freq_factor = number("low_freq_factor");
  config.block.rope_scaling.high_freq_factor = number("high_freq_factor");
  config.block.rope_scaling.original_max_position_embeddings =
      int64_t(number("original_max_position_embeddings"));
  require(config.block.rope_scaling.high_freq_factor > config.block.rope_scaling.low_freq_factor,
          "{}: rope_scaling high_freq_factor must exceed low_freq_factor", reader.source());
}

// What every family's block here leaves out: biases and activations other than SiLU.
void read_block_options(const ConfigReader& reader, BlockDescription& block) {
  block.attention_bias = reader.boolean_or("attention_bias", block.attention_bias);
  block.mlp_bias = reader.boolean_or("mlp_bias", block.mlp_bias);
  require(!block.attention_bias, "{}: attention_bias = true is not supported", reader.source());
  require(!block.mlp_bias, "{}: mlp_bias = true is not supported", reader.source());
  if (const json* act = reader.find("hidden_act"); act != nullptr && !act->is_null()) {
    require(act->is_string() && act->get<std::string>() == "silu",
            "{}: hidden_act {} is not supported (only silu)", reader.source(), act->dump());
  }
  block.activation = Activation::silu;
}

std::vector<int64_t> parse_token_ids(const json* field, const std::string& source) {
  std::vector<int64_t> ids;
  if (field == nullptr || field->is_null()) return ids;
  if (field->is_number_integer()) return {field->get<int64_t>()};
  require(field->is_array(), "{}: eos_token_id must be an integer or a list", source);
  for (const auto& id : *field) {
    require(id.is_number_integer(), "{}: eos_token_id entries must be integers", source);
    ids.push_back(id.get<int64_t>());
  }
  return ids;
}

std::string compute_config_hash(const ModelConfig& c) {
  const std::string canonical = fmt::format(
      "{}|v{}|h{}|i{}|l{}|q{}|kv{}|d{}|eps{:.9g}|theta{:.9g}|"
      "llama3:{}:{:.9g}:{:.9g}:{:.9g}:{}|tie{}",
      c.architecture_name, c.vocab_size, c.hidden_size, c.intermediate_size, c.num_layers,
      c.num_heads, c.num_kv_heads, c.head_dim, c.block.rms_norm_eps, c.block.rope_theta,
      c.block.rope_scaling.llama3, c.block.rope_scaling.factor,
      c.block.rope_scaling.low_freq_factor, c.block.rope_scaling.high_freq_factor,
      c.block.rope_scaling.original_max_position_embeddings, c.block.tie_word_embeddings);
  return to_hex(fnv1a64(canonical));
}

}  // namespace

int64_t ModelConfig::parameter_count() const {
  const int64_t attention = hidden_size * (q_dim() + 2 * kv_dim()) + q_dim() * hidden_size;
  const int64_t mlp = 3 * hidden_size * intermediate_size;
  const int64_t norms = 2 * hidden_size + (block.qk_norm ? 2 * head_dim : 0);
  const int64_t embeddings = vocab_size * hidden_size * (block.tie_word_embeddings ? 1 : 2);
  return num_layers * (attention + mlp + norms) + embeddings + hidden_size;
}

ModelConfig parse_model_config_json(const std::string& json_text, const std::string& source_name) {
  json root;
  try {
    root = json::parse(json_text);
  } catch (const json::exception& error) {
    fail("{}: not valid JSON: {}", source_name, error.what());
  }
  require(root.is_object(), "{}: expected a JSON object", source_name);
  const ConfigReader reader(root, source_name);
  ModelConfig config;
  const ModelFamily& family = parse_family(reader, &config.architecture_name);
  config.block = family.block;
  read_block_options(reader, config.block);
  if (family.reject_unsupported != nullptr) family.reject_unsupported(root, source_name);
  config.vocab_size = reader.positive_int("vocab_size");
  config.hidden_size = reader.positive_int("hidden_size");
  config.intermediate_size = reader.positive_int("intermediate_size");
  config.num_layers = reader.positive_int("num_hidden_layers");
  config.num_heads = reader.positive_int("num_attention_heads");
  config.num_kv_heads = reader.positive_int_or("num_key_value_heads", config.num_heads);
  // Absent fields take the defaults of the family's transformers config class.
  config.head_dim = reader.positive_int_or("head_dim", family.default_head_dim > 0
                                                           ? family.default_head_dim
                                                           : config.hidden_size / config.num_heads);
  config.max_position_embeddings =
      reader.positive_int_or("max_position_embeddings", family.default_max_position_embeddings);
  if (const json* eps = reader.find("rms_norm_eps"); eps != nullptr) {
    config.block.rms_norm_eps = reader.positive_number(*eps, "rms_norm_eps");
  }
  parse_rope(reader, config);
  config.block.tie_word_embeddings =
      reader.boolean_or("tie_word_embeddings", family.block.tie_word_embeddings);
  if (const json* bos = reader.find("bos_token_id"); bos != nullptr && bos->is_number_integer()) {
    config.bos_token_id = bos->get<int64_t>();
  }
  config.eos_token_ids = parse_token_ids(reader.find("eos_token_id"), source_name);

  require(config.num_heads % config.num_kv_heads == 0,
          "{}: num_attention_heads {} is not a multiple of num_key_value_heads {}", source_name,
          config.num_heads, config.num_kv_heads);
  require(config.head_dim > 0, "{}: head_dim missing, and hidden_size {} < num_attention_heads {}",
          source_name, config.hidden_size, config.num_heads);
  require(config.head_dim % 2 == 0, "{}: head_dim {} must be even for RoPE", source_name,
          config.head_dim);
  config.config_hash = compute_config_hash(config);
  return config;
}

ModelConfig load_model_config(const std::string& path) {
  return parse_model_config_json(read_file(path), path);
}

std::vector<int64_t> load_eos_token_ids(const std::string& model_dir, const ModelConfig& config) {
  std::vector<int64_t> ids = config.eos_token_ids;
  const std::string path = model_dir + "/generation_config.json";
  if (!file_exists(path)) return ids;
  json root;
  try {
    root = json::parse(read_file(path));
  } catch (const json::exception& error) {
    fail("{}: not valid JSON: {}", path, error.what());
  }
  if (!root.is_object()) return ids;
  const auto field = root.find("eos_token_id");
  for (const int64_t id : parse_token_ids(field == root.end() ? nullptr : &*field, path)) {
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  }
  return ids;
}

}  // namespace oscar
