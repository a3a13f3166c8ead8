#pragma once
// The weight set of a Qwen3/Llama checkpoint, held as views into memory-mapped safetensors files
// (or into owned buffers for random benchmark weights). Every tensor is checked against the
// config: a missing tensor, a wrong shape or a non-float dtype is an Error naming file and tensor.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "format/safetensors.h"
#include "format/tensor.h"
#include "model/model_config.h"

namespace oscar {

struct LayerWeights {
  TensorView input_norm;           // [hidden]
  TensorView q_proj;               // [num_heads * head_dim, hidden]
  TensorView k_proj;               // [num_kv_heads * head_dim, hidden]
  TensorView v_proj;               // [num_kv_heads * head_dim, hidden]
  TensorView o_proj;               // [hidden, num_heads * head_dim]
  TensorView q_norm;               // [head_dim] (Qwen3 only)
  TensorView k_norm;               // [head_dim] (Qwen3 only)
  TensorView post_attention_norm;  // [hidden]
  TensorView gate_proj;            // [intermediate, hidden]
  TensorView up_proj;              // [intermediate, hidden]
  TensorView down_proj;            // [hidden, intermediate]
};

struct ModelWeights {
  ModelConfig config;
  std::string source;       // the model directory (absolute), or "random weights, seed N"
  TensorView embed_tokens;  // [vocab, hidden]
  TensorView final_norm;    // [hidden]
  TensorView lm_head;       // [vocab, hidden]; the embedding when tie_word_embeddings
  std::vector<LayerWeights> layers;

  // What the views point into.
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  std::vector<std::vector<std::byte>> owned_buffers;
};

// Loads config.json and the weights of a Hugging Face model directory (model.safetensors, or
// shards listed in model.safetensors.index.json).
ModelWeights load_model(const std::string& model_dir);

// Random weights of the config's exact shapes (bf16, uniform with std 0.02, norms near 1), for
// benchmarks at real model sizes. Deterministic in `seed`.
ModelWeights make_random_model(const ModelConfig& config, uint64_t seed);

}  // namespace oscar
