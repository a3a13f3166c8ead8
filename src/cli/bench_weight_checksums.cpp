#include "cli/bench_weight_checksums.h"

#include "util/error.h"

namespace oscar::cli {
namespace {

TensorChecksum checksum(const TensorView& tensor) {
  require(tensor.dtype == DType::bf16, "weight checksums: tensor {} is not bf16", tensor.name);
  const auto* bits = reinterpret_cast<const uint16_t*>(tensor.data.data());
  const int64_t count = tensor.numel();
  int64_t sum = 0, weighted_sum = 0;
#pragma omp parallel for reduction(+ : sum, weighted_sum) schedule(static)
  for (int64_t i = 0; i < count; ++i) {
    sum += bits[i];
    weighted_sum += int64_t(bits[i]) * (i % 1021);
  }
  return {tensor.name, sum, weighted_sum};
}

}  // namespace

std::vector<TensorChecksum> weight_checksums(const ModelWeights& weights) {
  std::vector<const TensorView*> tensors = {&weights.embed_tokens, &weights.final_norm};
  if (!weights.config.block.tie_word_embeddings) tensors.push_back(&weights.lm_head);
  for (const LayerWeights& layer : weights.layers) {
    for (const TensorView* tensor :
         {&layer.input_norm, &layer.q_proj, &layer.k_proj, &layer.v_proj, &layer.o_proj,
          &layer.q_norm, &layer.k_norm, &layer.post_attention_norm, &layer.gate_proj,
          &layer.up_proj, &layer.down_proj}) {
      if (!tensor->data.empty()) tensors.push_back(tensor);  // q_norm and k_norm: Qwen3 only
    }
  }
  std::vector<TensorChecksum> checksums;
  for (const TensorView* tensor : tensors) checksums.push_back(checksum(*tensor));
  return checksums;
}

nlohmann::json checksums_json(const std::vector<TensorChecksum>& checksums) {
  nlohmann::json out = nlohmann::json::object();
  for (const TensorChecksum& c : checksums) out[c.name] = {c.sum, c.weighted_sum};
  return out;
}

}  // namespace oscar::cli
