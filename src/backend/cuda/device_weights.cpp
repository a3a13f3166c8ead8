#include "backend/cuda/device_weights.h"

#include <cstring>

#include "backend/cuda/gate_up_layout.h"
#include "model/rope.h"
#include "model/value_rotation_folding.h"
#include "util/error.h"
#include "util/half.h"

namespace oscar::cuda {
namespace {

using Bf16Vector = std::vector<uint16_t>;

void append_bf16(const TensorView& tensor, Bf16Vector& out) {
  const size_t start = out.size();
  out.resize(start + size_t(tensor.numel()));
  if (tensor.dtype == DType::bf16) {
    std::memcpy(out.data() + start, tensor.data.data(), tensor.data.size());
    return;
  }
  const std::vector<float> values = to_float_vector(tensor);
  for (size_t i = 0; i < values.size(); ++i) out[start + i] = float_to_bf16(values[i]);
}

void append_bf16(const std::vector<float>& values, Bf16Vector& out) {
  for (const float v : values) out.push_back(float_to_bf16(v));
}

void upload(const Bf16Vector& host, DeviceBuffer<__nv_bfloat16>& device) {
  device.resize(host.size());
  check(cudaMemcpy(device.data(), host.data(), host.size() * 2, cudaMemcpyHostToDevice),
        "cudaMemcpy(weights)");
}

void upload_matrix(const TensorView& tensor, DeviceBuffer<__nv_bfloat16>& device) {
  Bf16Vector host;
  append_bf16(tensor, host);
  upload(host, device);
}

// gate_proj's and up_proj's rows in the order of gate_up_layout.h.
Bf16Vector interleaved_gate_up(const LayerWeights& source, const ModelConfig& config) {
  const int64_t inner = config.intermediate_size, hidden = config.hidden_size;
  require(inner % 2 == 0,
          "CUDA backend: intermediate_size {} is odd (the gate|up layout pairs its outputs)",
          inner);
  Bf16Vector gate, up, out(size_t(2 * inner * hidden));
  append_bf16(source.gate_proj, gate);
  append_bf16(source.up_proj, up);
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

DeviceWeights upload_weights(const ModelWeights& weights, const KvRotations* rotations) {
  const ModelConfig& config = weights.config;
  DeviceWeights device;
  upload_matrix(weights.embed_tokens, device.embedding);
  if (!config.block.tie_word_embeddings) upload_matrix(weights.lm_head, device.lm_head);
  upload(floats(weights.final_norm), device.final_norm);
  upload(rope_inverse_frequencies(config), device.inverse_frequencies);
  device.layers.resize(weights.layers.size());
  for (size_t i = 0; i < weights.layers.size(); ++i) {
    const LayerWeights& source = weights.layers[i];
    DeviceLayerWeights& layer = device.layers[i];
    Bf16Vector qkv;
    append_bf16(source.q_proj, qkv);
    append_bf16(source.k_proj, qkv);
    if (rotations != nullptr) {
      // R_V folded in float, exactly as the CPU backend does, then rounded to bf16 once.
      std::vector<float> v_proj = to_float_vector(source.v_proj);
      std::vector<float> o_proj = to_float_vector(source.o_proj);
      fold_value_rotation(config, *rotations, int64_t(i), v_proj.data(), o_proj.data());
      append_bf16(v_proj, qkv);
      Bf16Vector o;
      append_bf16(o_proj, o);
      upload(o, layer.o);
      std::vector<float> key_rotations;
      const int64_t d = config.head_dim;
      for (int64_t h = 0; h < config.num_kv_heads; ++h) {
        const float* r = rotations->key_rotation(int64_t(i), h);
        key_rotations.insert(key_rotations.end(), r, r + d * d);
      }
      upload(key_rotations, layer.key_rotations);
    } else {
      append_bf16(source.v_proj, qkv);
      upload_matrix(source.o_proj, layer.o);
    }
    upload(qkv, layer.qkv);
    upload(interleaved_gate_up(source, config), layer.gate_up);
    upload_matrix(source.down_proj, layer.down);
    upload(floats(source.input_norm), layer.input_norm);
    upload(floats(source.post_attention_norm), layer.post_attention_norm);
    upload(floats(source.q_norm), layer.q_norm);
    upload(floats(source.k_norm), layer.k_norm);
  }
  return device;
}

}  // namespace oscar::cuda
