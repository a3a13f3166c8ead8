#pragma once
// Tensor parallelism's sharding arithmetic, as vLLM and SGLang split a Llama/Qwen3 block over tp
// ranks (Megatron-LM's scheme):
//   q/k/v, gate/up  column-parallel: each rank computes its heads' / its slice's outputs;
//   o, down         row-parallel: each rank multiplies its slice of the inputs, then an all-reduce
//                   sums the partial outputs (two all-reduces per layer);
//   embedding       vocab-parallel: each rank holds a slice of the rows, a token outside it gives
//                   zeros, and an all-reduce of the hidden rows completes them;
//   LM head         vocab-parallel: each rank computes its slice of the logits, an all-gather
//                   joins them.
// KV heads are split like the query heads; when num_kv_heads < tp, each KV head is replicated on
// tp / num_kv_heads ranks, and each rank holds the one KV head its query heads read. OSCAR's
// per-head rotations, the value fold and the error-feedback factors follow the KV heads.
#include <cstdint>
#include <vector>

#include "model/model_config.h"
#include "quant/kv_rotations.h"

namespace oscar {

struct ShardPlan {
  int rank = 0;
  int world_size = 1;
  int64_t first_head = 0;  // query heads [first_head, first_head + num_heads)
  int64_t num_heads = 0;
  int64_t first_kv_head = 0;  // KV heads [first_kv_head, first_kv_head + num_kv_heads)
  int64_t num_kv_heads = 0;
  int64_t kv_head_replicas = 1;    // ranks holding each KV head (tp / num_kv_heads when larger)
  int64_t first_intermediate = 0;  // MLP channels [first, first + intermediate_size)
  int64_t intermediate_size = 0;
  int64_t first_vocab = 0;  // embedding and LM head rows [first, first + vocab_size)
  int64_t vocab_size = 0;
};

// Throws Error naming the field when `tensor_parallel_size` cannot split `config`: it must divide
// num_attention_heads, intermediate_size and vocab_size, and either divide num_key_value_heads or
// be a multiple of it.
void check_tensor_parallel(const ModelConfig& config, int tensor_parallel_size);

ShardPlan make_shard_plan(const ModelConfig& config, int tensor_parallel_size, int rank);

// The shapes one rank runs: `config` with the plan's heads, KV heads, MLP channels and vocabulary
// (hidden size, head_dim and layers unchanged; the config hash stays the whole model's).
ModelConfig shard_config(const ModelConfig& config, const ShardPlan& plan);

// The rotations of the plan's KV heads (a per-layer rotation is shared, so it is kept whole).
KvRotations shard_rotations(const KvRotations& rotations, const ShardPlan& plan);

// Per-(layer, KV head) blocks, [layers][kv_heads][block_size] (the error-feedback factors), cut to
// the plan's KV heads.
std::vector<float> shard_per_kv_head(const std::vector<float>& values, int64_t num_layers,
                                     int64_t num_kv_heads, const ShardPlan& plan);

}  // namespace oscar
