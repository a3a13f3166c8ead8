#pragma once
// One description per model family (a config.json `architectures` class): how its transformer
// block is built, which both backends read (ModelConfig::block), and how its config.json is read
// (transformers' defaults of the family's config class, the fields that would switch on what oscar
// does not implement). Each family is one file, src/model/family_<name>.cpp; adding one:
// docs/adding-a-model.md.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace oscar {

// The MLP: down(activation(gate(x)) * up(x)).
enum class Activation { silu };

// RoPE frequency scaling; Llama 3's "llama3" rule is the one supported besides none.
struct RopeScaling {
  bool llama3 = false;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

// A pre-norm decoder block: x += o(attention(rope(q(n1(x))), rope(k(n1(x))), v(n1(x)))), then
// x += down(activation(gate(n2(x))) * up(n2(x))), n1 and n2 RMSNorms; a final RMSNorm and the LM
// head after the last block. RoPE rotates x[i] with x[i + head_dim / 2] ("rotate half").
struct BlockDescription {
  double rms_norm_eps = 1e-6;
  bool qk_norm = false;         // per-head RMSNorm of q and k before RoPE (Qwen3)
  bool attention_bias = false;  // biases on q, k, v (none of the families here has them)
  bool mlp_bias = false;
  Activation activation = Activation::silu;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;  // the LM head is the embedding matrix
};

struct ModelFamily {
  std::string_view architecture_name;  // config.json's architectures[0], e.g. "Qwen3ForCausalLM"
  BlockDescription block;              // what config.json does not override
  // transformers' defaults of the family's config class for fields config.json may omit
  int64_t default_head_dim = 0;  // 0: hidden_size / num_attention_heads
  int64_t default_max_position_embeddings = 2048;
  // Throws an Error naming the field where the config switches on what the family's block here
  // does not implement (beyond the checks every family gets); nullptr: nothing more to check.
  void (*reject_unsupported)(const nlohmann::json& config, const std::string& source) = nullptr;
};

// The family of config.json's architecture class; an Error listing the supported ones otherwise.
const ModelFamily& find_model_family(std::string_view architecture_name);

// Every supported family, in the order the error message lists them.
std::span<const ModelFamily* const> model_families();

}  // namespace oscar
