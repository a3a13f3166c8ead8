#pragma once
// The architecture hyper-parameters of a Hugging Face Qwen3ForCausalLM or LlamaForCausalLM
// checkpoint, read from its config.json exactly as transformers reads them.
#include <cstdint>
#include <string>
#include <vector>

namespace oscar {

enum class Architecture { qwen3, llama };

// RoPE frequency scaling; only Llama-3's "llama3" rule is supported besides none.
struct RopeScaling {
  bool llama3 = false;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

struct ModelConfig {
  Architecture architecture = Architecture::qwen3;
  std::string architecture_name;  // as written in config.json, e.g. "Qwen3ForCausalLM"
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool qk_norm = false;  // per-head RMSNorm of q and k (Qwen3)
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
