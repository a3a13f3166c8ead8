#include "model/model_fingerprint.h"

#include <algorithm>

#include "util/hash.h"

namespace oscar {
namespace {

constexpr size_t kWindowBytes = 4096;
constexpr size_t kWindowsPerTensor = 16;

uint64_t hash_tensor(const TensorView& tensor, uint64_t hash) {
  hash = fnv1a64(tensor.name, hash);
  hash = fnv1a64(dtype_name(tensor.dtype), hash);
  hash = fnv1a64(shape_to_string(tensor.shape), hash);
  const std::string_view bytes(reinterpret_cast<const char*>(tensor.data.data()),
                               tensor.data.size());
  if (bytes.size() <= kWindowBytes * kWindowsPerTensor) return fnv1a64(bytes, hash);
  const size_t last_start = bytes.size() - kWindowBytes;
  for (size_t window = 0; window < kWindowsPerTensor; ++window) {
    hash = fnv1a64(bytes.substr(last_start * window / (kWindowsPerTensor - 1), kWindowBytes), hash);
  }
  return hash;
}

}  // namespace

std::string weights_hash(const ModelWeights& weights) {
  uint64_t hash = kFnv1a64OffsetBasis;
  hash = hash_tensor(weights.embed_tokens, hash);
  hash = hash_tensor(weights.final_norm, hash);
  if (!weights.config.block.tie_word_embeddings) hash = hash_tensor(weights.lm_head, hash);
  for (const LayerWeights& layer : weights.layers) {
    for (const TensorView* tensor :
         {&layer.input_norm, &layer.q_proj, &layer.k_proj, &layer.v_proj, &layer.o_proj,
          &layer.q_norm, &layer.k_norm, &layer.post_attention_norm, &layer.gate_proj,
          &layer.up_proj, &layer.down_proj}) {
      hash = hash_tensor(*tensor, hash);
    }
  }
  return to_hex(hash);
}

ModelFingerprint model_fingerprint(const ModelWeights& weights) {
  const ModelConfig& config = weights.config;
  return {weights.source,  config.num_layers,  config.num_kv_heads,
          config.head_dim, config.config_hash, weights_hash(weights)};
}

}  // namespace oscar
