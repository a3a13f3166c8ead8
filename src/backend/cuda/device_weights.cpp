#include "backend/cuda/device_weights.h"

#include <cstring>
#include <optional>

#include "backend/cuda/gate_up_layout.h"
#include "backend/cuda/query_rotation_tiles.h"
#include "model/rope.h"
#include "model/value_rotation_folding.h"
#include "util/error.h"
#include "util/half.h"

namespace oscar::cuda {
namespace {

using Bf16Vector = std::vector<uint16_t>;

// Rows [first_row, first_row + rows) and columns [first_column, first_column + columns) of a
// matrix: a rank's share of a weight (parallel/shard_plan.h), or all of it.
struct Block {
  int64_t first_row = 0, rows = 0, first_column = 0, columns = 0;
};

Block whole(const TensorView& tensor) {
  return {0, tensor.shape.at(0), 0, tensor.numel() / tensor.shape.at(0)};
}
Block row_block(const TensorView& tensor, int64_t first, int64_t count) {
  Block block = whole(tensor);
  block.first_row = first;
  block.rows = count;
  return block;
}
Block column_block(const TensorView& tensor, int64_t first, int64_t count) {
  Block block = whole(tensor);
  block.first_column = first;
  block.columns = count;
  return block;
}

std::vector<float> float_block(const TensorView& tensor, const Block& block) {
  return to_float_block(tensor, block.first_row, block.rows, block.first_column, block.columns);
}

void append_bf16(const std::vector<float>& values, Bf16Vector& out) {
  for (const float v : values) out.push_back(float_to_bf16(v));
}

// A bf16 checkpoint's rows are copied as they are; other dtypes go through float.
void append_bf16(const TensorView& tensor, const Block& block, Bf16Vector& out) {
  if (tensor.dtype != DType::bf16) {
    append_bf16(float_block(tensor, block), out);
    return;
  }
  const int64_t columns = whole(tensor).columns;
  const auto* source = reinterpret_cast<const uint16_t*>(tensor.data.data());
  for (int64_t r = 0; r < block.rows; ++r) {
    const uint16_t* row = source + (block.first_row + r) * columns + block.first_column;
    out.insert(out.end(), row, row + block.columns);
  }
}

void upload_matrix(const TensorView& tensor, const Block& block,
                   DeviceBuffer<__nv_bfloat16>& device) {
  Bf16Vector host;
  append_bf16(tensor, block, host);
  upload(host, device);
}

// The plan's rows of gate_proj and up_proj in the order of gate_up_layout.h.
Bf16Vector interleaved_gate_up(const LayerWeights& source, const ModelConfig& config,
                               const ShardPlan& plan) {
  const int64_t inner = plan.intermediate_size, hidden = config.hidden_size;
  require(inner % 2 == 0,
          "CUDA backend: intermediate_size {} is odd (the gate|up layout pairs its outputs)",
          inner);
  Bf16Vector gate, up, out(size_t(2 * inner * hidden));
  append_bf16(source.gate_proj, row_block(source.gate_proj, plan.first_intermediate, inner), gate);
  append_bf16(source.up_proj, row_block(source.up_proj, plan.first_intermediate, inner), up);
  for (int64_t i = 0; i < inner; ++i) {
    std::memcpy(&out[size_t(gate_column(i) * hidden)], &gate[size_t(i * hidden)],
                size_t(hidden) * 2);
    std::memcpy(&out[size_t(up_column(i) * hidden)], &up[size_t(i * hidden)], size_t(hidden) * 2);
  }
  return out;
}

std::vector<float> floats(const TensorView& tensor) {
  return tensor.data.empty() ? std::vector<float>{} : to_float_vector(tensor);
}

}  // namespace

size_t DeviceWeights::matrix_bytes() const {
  size_t total = lm_head.size() > 0 ? lm_head.bytes() : embedding.bytes();
  for (const DeviceLayerWeights& l : layers)
    total += l.qkv.bytes() + l.o.bytes() + l.gate_up.bytes() + l.down.bytes();
  return total;
}

DeviceWeights upload_weights(const ModelWeights& weights, const KvRotations* rotations,
                             const ShardPlan& plan) {
  const ModelConfig& config = weights.config;
  const ModelConfig shard = shard_config(config, plan);
  const int64_t d = config.head_dim;
  std::optional<KvRotations> shard_rotations_kept;
  if (rotations != nullptr) shard_rotations_kept = shard_rotations(*rotations, plan);
  DeviceWeights device;
  upload_matrix(weights.embed_tokens,
                row_block(weights.embed_tokens, plan.first_vocab, plan.vocab_size),
                device.embedding);
  if (!config.block.tie_word_embeddings) {
    upload_matrix(weights.lm_head, row_block(weights.lm_head, plan.first_vocab, plan.vocab_size),
                  device.lm_head);
  }
  upload(floats(weights.final_norm), device.final_norm);
  upload(rope_inverse_frequencies(config), device.inverse_frequencies);
  device.layers.resize(weights.layers.size());
  for (size_t i = 0; i < weights.layers.size(); ++i) {
    const LayerWeights& source = weights.layers[i];
    DeviceLayerWeights& layer = device.layers[i];
    const Block v_rows = row_block(source.v_proj, plan.first_kv_head * d, plan.num_kv_heads * d);
    const Block o_columns = column_block(source.o_proj, plan.first_head * d, plan.num_heads * d);
    Bf16Vector qkv;
    append_bf16(source.q_proj, row_block(source.q_proj, plan.first_head * d, plan.num_heads * d),
                qkv);
    append_bf16(source.k_proj,
                row_block(source.k_proj, plan.first_kv_head * d, plan.num_kv_heads * d), qkv);
    if (shard_rotations_kept) {
      // R_V folded in float, exactly as the CPU backend does, then rounded to bf16 once. The fold
      // of a KV head touches only its rows of W_v and its group's columns of W_o, so a rank's
      // share folds alone.
      std::vector<float> v_proj = float_block(source.v_proj, v_rows);
      std::vector<float> o_proj = float_block(source.o_proj, o_columns);
      fold_value_rotation(shard, *shard_rotations_kept, int64_t(i), v_proj.data(), o_proj.data());
      append_bf16(v_proj, qkv);
      Bf16Vector o;
      append_bf16(o_proj, o);
      upload(o, layer.o);
      const std::vector<float> key_rotations =
          shard_rotations_kept->layer_key_rotations(int64_t(i), shard.num_kv_heads);
      upload(key_rotations, layer.key_rotations);
      upload(query_rotation_tiles(key_rotations, d), layer.query_rotation_tiles);
    } else {
      append_bf16(source.v_proj, v_rows, qkv);
      upload_matrix(source.o_proj, o_columns, layer.o);
    }
    upload(qkv, layer.qkv);
    upload(interleaved_gate_up(source, config, plan), layer.gate_up);
    upload_matrix(source.down_proj,
                  column_block(source.down_proj, plan.first_intermediate, plan.intermediate_size),
                  layer.down);
    upload(floats(source.input_norm), layer.input_norm);
    upload(floats(source.post_attention_norm), layer.post_attention_norm);
    upload(floats(source.q_norm), layer.q_norm);
    upload(floats(source.k_norm), layer.k_norm);
  }
  return device;
}

}  // namespace oscar::cuda
