#include "backend/cpu/cpu_backend.h"

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "backend/cpu/cpu_attention.h"
#include "model/rope.h"
#include "model/value_error_feedback.h"
#include "model/value_rotation_folding.h"
#include "quant/error_feedback.h"
#include "util/error.h"

namespace oscar {

struct CpuBackend::StepRows {
  int64_t total = 0;
  std::vector<int64_t> first_row;  // per step: its first row in the step's activations
  std::vector<int64_t> positions;  // per row
  std::vector<float> cos, sin;     // per row: head_dim / 2 values each
};

namespace {

std::vector<float> vector_of(const TensorView& tensor) {
  return tensor.data.empty() ? std::vector<float>{} : to_float_vector(tensor);
}

}  // namespace

CpuBackend::CpuBackend(const ModelWeights& weights, const BackendOptions& options,
                       const KvRotations* rotations)
    : config_(weights.config),
      kv_(options.kv),
      layout_(make_page_layout(options.kv, weights.config.num_kv_heads, weights.config.head_dim)),
      capacity_(options.capacity),
      store_(options.kv, layout_, weights.config.num_layers, options.capacity) {
  if (options.num_threads > 0) omp_set_num_threads(options.num_threads);
  embed_tokens_ = CpuMatrix::from_tensor(weights.embed_tokens);
  if (!config_.block.tie_word_embeddings) untied_lm_head_ = CpuMatrix::from_tensor(weights.lm_head);
  final_norm_ = vector_of(weights.final_norm);
  rope_inverse_frequencies_ = rope_inverse_frequencies(config_);
  layers_.resize(weights.layers.size());
  for (size_t i = 0; i < weights.layers.size(); ++i) {
    const LayerWeights& source = weights.layers[i];
    Layer& layer = layers_[i];
    layer.input_norm = vector_of(source.input_norm);
    layer.post_attention_norm = vector_of(source.post_attention_norm);
    layer.q_norm = vector_of(source.q_norm);
    layer.k_norm = vector_of(source.k_norm);
    layer.q_proj = CpuMatrix::from_tensor(source.q_proj);
    layer.k_proj = CpuMatrix::from_tensor(source.k_proj);
    layer.v_proj = CpuMatrix::from_tensor(source.v_proj);
    layer.o_proj = CpuMatrix::from_tensor(source.o_proj);
    layer.gate_proj = CpuMatrix::from_tensor(source.gate_proj);
    layer.up_proj = CpuMatrix::from_tensor(source.up_proj);
    layer.down_proj = CpuMatrix::from_tensor(source.down_proj);
    if (rotations != nullptr) {
      fold_value_rotation(config_, *rotations, int64_t(i), layer.v_proj.values.data(),
                          layer.o_proj.values.data());
      const int64_t d = config_.head_dim;
      for (int64_t h = 0; h < config_.num_kv_heads; ++h) {
        const float* r = rotations->key_rotation(int64_t(i), h);
        layer.key_rotations.insert(layer.key_rotations.end(), r, r + d * d);
      }
    }
  }
  require(!(kv_.key_error_feedback || kv_.value_error_feedback) || rotations != nullptr,
          "error feedback needs the oscar method's rotations file");
  store_.set_feedback(
      kv_.key_error_feedback ? key_feedback_factors(*rotations) : std::vector<float>{},
      kv_.value_error_feedback ? value_feedback_factors(weights, *rotations)
                               : std::vector<float>{});
}

std::string CpuBackend::device_name() const {
  return fmt::format("cpu ({} threads)", omp_get_max_threads());
}

void CpuBackend::forward(std::span<const SequenceStep> steps, StepLogits& logits,
                         ActivationObserver* observer) {
  StepRows rows;
  const int64_t half = config_.head_dim / 2;
  for (const SequenceStep& step : steps) {
    require(step.kv != nullptr && !step.tokens.empty(), "forward: a step needs tokens and pages");
    rows.first_row.push_back(rows.total);
    for (size_t i = 0; i < step.tokens.size(); ++i) {
      rows.positions.push_back(step.kv->num_tokens() + int64_t(i));
    }
    rows.total += int64_t(step.tokens.size());
  }
  rows.cos.resize(size_t(rows.total * half));
  rows.sin.resize(size_t(rows.total * half));
  for (int64_t r = 0; r < rows.total; ++r) {
    rope_cos_sin(rope_inverse_frequencies_, rows.positions[size_t(r)], &rows.cos[size_t(r * half)],
                 &rows.sin[size_t(r * half)]);
  }

  const int64_t hidden_size = config_.hidden_size;
  std::vector<float> hidden(size_t(rows.total * hidden_size));
  int64_t row = 0;
  for (const SequenceStep& step : steps) {
    for (const int32_t token : step.tokens) {
      require(token >= 0 && token < config_.vocab_size, "forward: token id {} outside vocab {}",
              token, config_.vocab_size);
      std::memcpy(&hidden[size_t(row * hidden_size)],
                  &embed_tokens_.values[size_t(int64_t(token) * hidden_size)],
                  size_t(hidden_size) * sizeof(float));
      ++row;
    }
  }
  for (int64_t layer = 0; layer < config_.num_layers; ++layer) {
    attention_block(layer, rows, steps, hidden.data(), observer);
    mlp_block(layers_[size_t(layer)], rows.total, hidden.data());
  }
  compute_logits(rows, steps, hidden.data(), logits);
}

void CpuBackend::apply_qk_norm_and_rope(const Layer& layer, const StepRows& rows, float* q,
                                        float* k) const {
  const int64_t d = config_.head_dim;
  const int64_t half = d / 2;
  const int64_t heads = config_.num_heads;
  const int64_t kv_heads = config_.num_kv_heads;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows.total; ++r) {
    float* q_row = q + r * heads * d;
    float* k_row = k + r * kv_heads * d;
    if (config_.block.qk_norm) {
      rms_norm(q_row, heads, d, layer.q_norm.data(), config_.block.rms_norm_eps, q_row);
      rms_norm(k_row, kv_heads, d, layer.k_norm.data(), config_.block.rms_norm_eps, k_row);
    }
    const float* cos_values = &rows.cos[size_t(r * half)];
    const float* sin_values = &rows.sin[size_t(r * half)];
    for (int64_t h = 0; h < heads; ++h) apply_rope(q_row + h * d, cos_values, sin_values, d);
    for (int64_t h = 0; h < kv_heads; ++h) apply_rope(k_row + h * d, cos_values, sin_values, d);
  }
}

void CpuBackend::attention_block(int64_t layer_index, const StepRows& rows,
                                 std::span<const SequenceStep> steps, float* hidden,
                                 ActivationObserver* observer) {
  const Layer& layer = layers_[size_t(layer_index)];
  const int64_t tokens = rows.total;
  const int64_t d = config_.head_dim;
  const int64_t heads = config_.num_heads;
  const int64_t kv_heads = config_.num_kv_heads;
  std::vector<float> normed(size_t(tokens * config_.hidden_size));
  rms_norm(hidden, tokens, config_.hidden_size, layer.input_norm.data(), config_.block.rms_norm_eps,
           normed.data());
  std::vector<float> q(size_t(tokens * heads * d)), k(size_t(tokens * kv_heads * d)),
      v(size_t(tokens * kv_heads * d));
  linear(normed.data(), tokens, layer.q_proj, q.data());
  linear(normed.data(), tokens, layer.k_proj, k.data());
  linear(normed.data(), tokens, layer.v_proj, v.data());
  apply_qk_norm_and_rope(layer, rows, q.data(), k.data());
  if (observer != nullptr) observer->observe({layer_index, tokens, q.data(), k.data(), v.data()});
  if (!layer.key_rotations.empty()) {
    // Keys are stored as k R_K and queries read as q R_K: dot products are unchanged.
    for (int64_t h = 0; h < kv_heads; ++h) {
      const float* r = &layer.key_rotations[size_t(h * d * d)];
      rotate_rows(k.data() + h * d, tokens, kv_heads * d, r, d);
      for (int64_t g = 0; g < config_.group_size(); ++g) {
        rotate_rows(q.data() + (h * config_.group_size() + g) * d, tokens, heads * d, r, d);
      }
    }
  }
  std::vector<float> attention(size_t(tokens * heads * d));
  for (size_t s = 0; s < steps.size(); ++s) {
    const SequenceStep& step = steps[s];
    const int64_t first_row = rows.first_row[s];
    const int64_t count = int64_t(step.tokens.size());
    const int64_t cached = step.kv->num_tokens();
    const auto& pages = step.kv->pages();
    for (int64_t i = 0; i < count; ++i) {
      store_.write_full(layer_index, pages, cached + i, &k[size_t((first_row + i) * kv_heads * d)],
                        &v[size_t((first_row + i) * kv_heads * d)]);
    }
    const int64_t until = step.kv->full_precision_until();
    store_.quantize(layer_index, pages, quantized_end(kv_, cached, until),
                    quantized_end(kv_, cached + count, until),
                    band_step_begin(kv_, cached, cached + count, until));
    AttentionRequest request;
    request.layer = layer_index;
    request.pages = &pages;
    request.first_position = cached;
    request.count = count;
    request.full_precision_until = until;
    request.queries = &q[size_t(first_row * heads * d)];
    request.output = &attention[size_t(first_row * heads * d)];
    cpu_attention(store_, kv_, config_, request);
  }
  std::vector<float> projected(size_t(tokens * config_.hidden_size));
  linear(attention.data(), tokens, layer.o_proj, projected.data());
  for (size_t i = 0; i < projected.size(); ++i) hidden[i] += projected[i];
}

void CpuBackend::mlp_block(const Layer& layer, int64_t tokens, float* hidden) {
  const int64_t hidden_size = config_.hidden_size;
  const int64_t inner = config_.intermediate_size;
  std::vector<float> normed(size_t(tokens * hidden_size));
  rms_norm(hidden, tokens, hidden_size, layer.post_attention_norm.data(),
           config_.block.rms_norm_eps, normed.data());
  std::vector<float> gate(size_t(tokens * inner)), up(size_t(tokens * inner));
  linear(normed.data(), tokens, layer.gate_proj, gate.data());
  linear(normed.data(), tokens, layer.up_proj, up.data());
  swiglu(gate.data(), up.data(), tokens * inner, gate.data());
  std::vector<float> down(size_t(tokens * hidden_size));
  linear(gate.data(), tokens, layer.down_proj, down.data());
  for (size_t i = 0; i < down.size(); ++i) hidden[i] += down[i];
}

void CpuBackend::compute_logits(const StepRows& rows, std::span<const SequenceStep> steps,
                                const float* hidden, StepLogits& logits) {
  const int64_t hidden_size = config_.hidden_size;
  std::vector<int64_t> selected;
  for (size_t s = 0; s < steps.size(); ++s) {
    const int64_t count = int64_t(steps[s].tokens.size());
    const int64_t first = steps[s].all_logits ? 0 : count - 1;
    for (int64_t i = first; i < count; ++i) selected.push_back(rows.first_row[s] + i);
  }
  std::vector<float> normed(selected.size() * size_t(hidden_size));
  for (size_t i = 0; i < selected.size(); ++i) {
    rms_norm(hidden + selected[i] * hidden_size, 1, hidden_size, final_norm_.data(),
             config_.block.rms_norm_eps, &normed[i * size_t(hidden_size)]);
  }
  const CpuMatrix& head = untied_lm_head_ ? *untied_lm_head_ : embed_tokens_;
  logits_.resize(selected.size() * size_t(config_.vocab_size));
  linear(normed.data(), int64_t(selected.size()), head, logits_.data());
  logits.values = logits_;
  logits.rows = int64_t(selected.size());
  logits.vocab_size = config_.vocab_size;
}

}  // namespace oscar
