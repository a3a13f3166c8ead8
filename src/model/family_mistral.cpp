// Mistral (transformers' MistralForCausalLM, MistralConfig): Llama's block and tensor names.
// MistralConfig turns on a sliding window of 4096 tokens unless config.json says "sliding_window":
// null (as Mistral-7B-v0.3 does); a window is not implemented here, so one shorter than the
// model's context is refused.
#include <nlohmann/json.hpp>

#include "model/model_families.h"
#include "util/error.h"

namespace oscar {
namespace {

constexpr int64_t kMistralConfigSlidingWindow = 4096;  // MistralConfig's default
constexpr int64_t kMistralConfigMaxPositions = 4096 * 32;

void reject_mistral_sliding_window(const nlohmann::json& config, const std::string& source) {
  const auto window = config.find("sliding_window");
  if (window != config.end() && window->is_null()) return;
  const int64_t tokens = window == config.end()        ? kMistralConfigSlidingWindow
                         : window->is_number_integer() ? window->get<int64_t>()
                                                       : -1;
  const auto positions = config.find("max_position_embeddings");
  const int64_t context = positions != config.end() && positions->is_number_integer()
                              ? positions->get<int64_t>()
                              : kMistralConfigMaxPositions;
  require(tokens >= context,
          "{}: sliding_window {} is not supported (only null, or at least the context of {} "
          "tokens; MistralConfig's default when the field is absent is 4096)",
          source, window == config.end() ? "absent" : window->dump(), context);
}

}  // namespace

const ModelFamily& mistral_family() {
  static const ModelFamily family = {
      .architecture_name = "MistralForCausalLM",
      .block = {.rms_norm_eps = 1e-6, .qk_norm = false, .rope_theta = 10000.0},
      .default_head_dim = 0,
      .default_max_position_embeddings = kMistralConfigMaxPositions,
      .reject_unsupported = reject_mistral_sliding_window,
  };
  return family;
}

}  // namespace oscar
