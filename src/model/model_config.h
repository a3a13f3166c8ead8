#pragma once
// The hyper-parameters of a Hugging Face checkpoint of a supported family (model_family.h), read
// from its config.json exactly as transformers reads them.
#include <cstdint>
#include <string>
#include <vector>

#include "model/model_family.h"

namespace oscar {

struct ModelConfig {
  std::string architecture_name;  // as written in config.json, e.g. "Qwen3ForCausalLM"
  BlockDescription block;         // the family's block with config.json's norms, RoPE, tying
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t max_position_embeddings = 0;
  int64_t bos_token_id = -1;
  std::vector<int64_t> eos_token_ids;
  // A fingerprint of the fields above that determine the model's shape and math, used to tie a
  // rotations file to the model it was calibrated on.
  std::string config_hash;

  int64_t group_size() const { return num_heads / num_kv_heads; }  // query heads per KV head
  int64_t q_dim() const { return num_heads * head_dim; }
  int64_t kv_dim() const { return num_kv_heads * head_dim; }
  int64_t parameter_count() const;
};

ModelConfig parse_model_config_json(const std::string& json_text, const std::string& source_name);
ModelConfig load_model_config(const std::string& path);  // a config.json file

// The end-of-sequence ids: config.json's, plus generation_config.json's when the directory has one.
std::vector<int64_t> load_eos_token_ids(const std::string& model_dir, const ModelConfig& config);

}  // namespace oscar
