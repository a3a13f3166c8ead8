#pragma once
// The model's weights on the GPU: matrices in bf16 (q|k|v and gate|up fused, one product each),
// norms, RoPE frequencies and key rotations in float. The value rotation is folded into W_v and W_o
// on the host in float (model/value_rotation_folding.h) before the conversion to bf16.
#include <cuda_bf16.h>

#include <vector>

#include "backend/cuda/device_buffer.h"
#include "model/model_weights.h"
#include "parallel/shard_plan.h"
#include "quant/kv_rotations.h"

namespace oscar::cuda {

struct DeviceLayerWeights {
  DeviceBuffer<__nv_bfloat16> qkv;  // [q_dim + 2 kv_dim][hidden]
  DeviceBuffer<__nv_bfloat16> o;    // [hidden][q_dim]
  DeviceBuffer<__nv_bfloat16>
      gate_up;  // [2 intermediate][hidden], rows as gate_up_layout.h orders them
  DeviceBuffer<__nv_bfloat16> down;  // [hidden][intermediate]
  DeviceBuffer<float> input_norm, post_attention_norm, q_norm, k_norm;
  DeviceBuffer<float> key_rotations;  // [kv_heads][D][D], empty when keys are not rotated
  // R_K^T in bf16 high and low parts for the prefill kernel (query_rotation_tiles.h),
  // [kv_heads][2][D][D]
  DeviceBuffer<__nv_bfloat16> query_rotation_tiles;
};

struct DeviceWeights {
  std::vector<DeviceLayerWeights> layers;
  DeviceBuffer<__nv_bfloat16> embedding;  // [vocab][hidden], the plan's rows of it
  DeviceBuffer<__nv_bfloat16> lm_head;    // empty when tied to the embedding
  DeviceBuffer<float> final_norm;
  DeviceBuffer<float> inverse_frequencies;  // head_dim / 2

  const __nv_bfloat16* output_matrix() const {
    return lm_head.size() > 0 ? lm_head.data() : embedding.data();
  }
  size_t matrix_bytes() const;  // bytes a decode step reads (layers' matrices and the LM head)
};

// `plan`'s share of the weights (all of them with one rank): the rank's query and KV heads, MLP
// channels and vocabulary rows (parallel/shard_plan.h). `rotations` (the whole model's) may be
// null: no key rotation, no folding.
DeviceWeights upload_weights(const ModelWeights& weights, const KvRotations* rotations,
                             const ShardPlan& plan);

}  // namespace oscar::cuda
