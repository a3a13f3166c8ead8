// Llama (transformers' LlamaForCausalLM, LlamaConfig): the plain pre-norm block, no q/k norm, with
// Llama 3's "llama3" RoPE scaling where config.json asks for it.
#include "model/model_families.h"

namespace oscar {

const ModelFamily& llama_family() {
  static const ModelFamily family = {
      .architecture_name = "LlamaForCausalLM",
      .block = {.rms_norm_eps = 1e-6, .qk_norm = false, .rope_theta = 10000.0},
      .default_head_dim = 0,
      .default_max_position_embeddings = 2048,
  };
  return family;
}

}  // namespace oscar
