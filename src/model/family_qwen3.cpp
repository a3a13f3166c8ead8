// Qwen3 (transformers' Qwen3ForCausalLM, Qwen3Config): a Llama-shaped block with a per-head RMSNorm
// of q and k before RoPE, head_dim given apart from hidden_size. Qwen3's sliding-window layers are
// not implemented: use_sliding_window and layer_types must leave every layer full attention.
#include <nlohmann/json.hpp>

#include "model/model_families.h"
#include "util/error.h"

namespace oscar {
namespace {

void reject_qwen3_sliding_window(const nlohmann::json& config, const std::string& source) {
  if (const auto it = config.find("use_sliding_window"); it != config.end() && !it->is_null()) {
    require(it->is_boolean() && !it->get<bool>(), "{}: use_sliding_window = {} is not supported",
            source, it->dump());
  }
  const auto types = config.find("layer_types");
  if (types == config.end() || !types->is_array()) return;
  for (size_t layer = 0; layer < types->size(); ++layer) {
    require((*types)[layer] == "full_attention",
            "{}: layer_types[{}] = {} is not supported (only full_attention)", source, layer,
            (*types)[layer].dump());
  }
}

}  // namespace

const ModelFamily& qwen3_family() {
  static const ModelFamily family = {
      .architecture_name = "Qwen3ForCausalLM",
      .block = {.rms_norm_eps = 1e-6, .qk_norm = true, .rope_theta = 10000.0},
      .default_head_dim = 128,
      .default_max_position_embeddings = 32768,
      .reject_unsupported = reject_qwen3_sliding_window,
  };
  return family;
}

}  // namespace oscar
