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

int world_size_of(const Communicator* communicator) {
  return communicator != nullptr ? communicator->world_size() : 1;
}

// A rank's share of a weight: rows [first, first + count) (column-parallel), or columns
// (row-parallel); the whole matrix, uncopied, when the share is all of it.
CpuMatrix rows_of(const TensorView& tensor, int64_t first, int64_t count) {
  CpuMatrix whole = CpuMatrix::from_tensor(tensor);
  if (first == 0 && count == whole.rows) return whole;
  return whole.rows_slice(first, count);
}

CpuMatrix columns_of(const TensorView& tensor, int64_t first, int64_t count) {
  CpuMatrix whole = CpuMatrix::from_tensor(tensor);
  if (first == 0 && count == whole.cols) return whole;
  return whole.columns_slice(first, count);
}

}  // namespace

CpuBackend::CpuBackend(const ModelWeights& weights, const BackendOptions& options,
                       const KvRotations* rotations)
    : config_(weights.config),
      plan_(make_shard_plan(weights.config, world_size_of(options.communicator),
                            options.communicator != nullptr ? options.communicator->rank() : 0)),
      shard_(shard_config(weights.config, plan_)),
      communicator_(options.communicator),
      kv_(options.kv),
      layout_(make_page_layout(options.kv, shard_.num_kv_heads, shard_.head_dim)),
      capacity_(options.capacity),
      store_(options.kv, layout_, weights.config.num_layers, options.capacity) {
  if (options.num_threads > 0) omp_set_num_threads(options.num_threads);
  const int64_t d = config_.head_dim;
  embed_tokens_ = rows_of(weights.embed_tokens, plan_.first_vocab, plan_.vocab_size);
  if (!config_.block.tie_word_embeddings) {
    untied_lm_head_ = rows_of(weights.lm_head, plan_.first_vocab, plan_.vocab_size);
  }
  final_norm_ = vector_of(weights.final_norm);
  rope_inverse_frequencies_ = rope_inverse_frequencies(config_);
  std::optional<KvRotations> shard_rotations_kept;
  if (rotations != nullptr) shard_rotations_kept = shard_rotations(*rotations, plan_);
  layers_.resize(weights.layers.size());
  for (size_t i = 0; i < weights.layers.size(); ++i) {
    const LayerWeights& source = weights.layers[i];
    Layer& layer = layers_[i];
    layer.input_norm = vector_of(source.input_norm);
    layer.post_attention_norm = vector_of(source.post_attention_norm);
    layer.q_norm = vector_of(source.q_norm);
    layer.k_norm = vector_of(source.k_norm);
    layer.q_proj = rows_of(source.q_proj, plan_.first_head * d, plan_.num_heads * d);
    layer.k_proj = rows_of(source.k_proj, plan_.first_kv_head * d, plan_.num_kv_heads * d);
    layer.v_proj = rows_of(source.v_proj, plan_.first_kv_head * d, plan_.num_kv_heads * d);
    layer.o_proj = columns_of(source.o_proj, plan_.first_head * d, plan_.num_heads * d);
    layer.gate_proj = rows_of(source.gate_proj, plan_.first_intermediate, plan_.intermediate_size);
    layer.up_proj = rows_of(source.up_proj, plan_.first_intermediate, plan_.intermediate_size);
    layer.down_proj =
        columns_of(source.down_proj, plan_.first_intermediate, plan_.intermediate_size);
    if (shard_rotations_kept) {
      // The rank's own KV heads and the query heads that read them: the fold of each KV head
      // touches only its rows of W_v and its group's columns of W_o, so the shard folds alone.
      fold_value_rotation(shard_, *shard_rotations_kept, int64_t(i), layer.v_proj.values.data(),
                          layer.o_proj.values.data());
      layer.key_rotations =
          shard_rotations_kept->layer_key_rotations(int64_t(i), shard_.num_kv_heads);
    }
  }
  require(!(kv_.key_error_feedback || kv_.value_error_feedback) || rotations != nullptr,
          "error feedback needs the oscar method's rotations file");
  store_.set_feedback(
      kv_.key_error_feedback ? key_feedback_factors(*shard_rotations_kept) : std::vector<float>{},
      kv_.value_error_feedback
          ? value_feedback_factors(weights, *rotations, {plan_.first_kv_head, plan_.num_kv_heads})
          : std::vector<float>{});
}

std::string CpuBackend::device_name() const {
  if (plan_.world_size == 1) return fmt::format("cpu ({} threads)", omp_get_max_threads());
  return fmt::format("cpu ({} threads), tensor-parallel rank {} of {}", omp_get_max_threads(),
                     plan_.rank, plan_.world_size);
}

void CpuBackend::all_reduce(std::vector<float>& partial) {
  if (communicator_ != nullptr && plan_.world_size > 1) communicator_->all_reduce_sum(partial);
}

void CpuBackend::embed(std::span<const SequenceStep> steps, float* hidden) const {
  // Vocab-parallel: a token outside this rank's rows leaves its row zero; the all-reduce that
  // follows fills it from the rank that holds it.
  const int64_t hidden_size = config_.hidden_size;
  int64_t row = 0;
  for (const SequenceStep& step : steps) {
    for (const int32_t token : step.tokens) {
      require(token >= 0 && token < config_.vocab_size, "forward: token id {} outside vocab {}",
              token, config_.vocab_size);
      const int64_t local = int64_t(token) - plan_.first_vocab;
      if (local >= 0 && local < plan_.vocab_size) {
        std::memcpy(&hidden[size_t(row * hidden_size)],
                    &embed_tokens_.values[size_t(local * hidden_size)],
                    size_t(hidden_size) * sizeof(float));
      }
      ++row;
    }
  }
}

void CpuBackend::forward(std::span<const SequenceStep> steps, StepLogits& logits,
                         ActivationObserver* observer) {
  require(observer == nullptr || plan_.world_size == 1,
          "activation observers (calibration, attention error) run with one rank, not {}",
          plan_.world_size);
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

  std::vector<float> hidden(size_t(rows.total * config_.hidden_size));
  embed(steps, hidden.data());
  all_reduce(hidden);
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
  const int64_t heads = shard_.num_heads;
  const int64_t kv_heads = shard_.num_kv_heads;
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
  const int64_t heads = shard_.num_heads;
  const int64_t kv_heads = shard_.num_kv_heads;
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
      for (int64_t g = 0; g < shard_.group_size(); ++g) {
        rotate_rows(q.data() + (h * shard_.group_size() + g) * d, tokens, heads * d, r, d);
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
    cpu_attention(store_, kv_, shard_, request);
  }
  std::vector<float> projected(size_t(tokens * config_.hidden_size));
  linear(attention.data(), tokens, layer.o_proj, projected.data());
  all_reduce(projected);
  for (size_t i = 0; i < projected.size(); ++i) hidden[i] += projected[i];
}

void CpuBackend::mlp_block(const Layer& layer, int64_t tokens, float* hidden) {
  const int64_t hidden_size = config_.hidden_size;
  const int64_t inner = shard_.intermediate_size;
  std::vector<float> normed(size_t(tokens * hidden_size));
  rms_norm(hidden, tokens, hidden_size, layer.post_attention_norm.data(),
           config_.block.rms_norm_eps, normed.data());
  std::vector<float> gate(size_t(tokens * inner)), up(size_t(tokens * inner));
  linear(normed.data(), tokens, layer.gate_proj, gate.data());
  linear(normed.data(), tokens, layer.up_proj, up.data());
  swiglu(gate.data(), up.data(), tokens * inner, gate.data());
  std::vector<float> down(size_t(tokens * hidden_size));
  linear(gate.data(), tokens, layer.down_proj, down.data());
  all_reduce(down);
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
  const size_t count = selected.size();
  logits_.resize(count * size_t(config_.vocab_size));
  if (plan_.world_size == 1) {
    linear(normed.data(), int64_t(count), head, logits_.data());
  } else {
    // Vocab-parallel: each rank's slice of every row, gathered as [rank][row][slice].
    const size_t slice = size_t(plan_.vocab_size);
    shard_logits_.resize(count * slice);
    linear(normed.data(), int64_t(count), head, shard_logits_.data());
    std::vector<float> gathered(shard_logits_.size() * size_t(plan_.world_size));
    communicator_->all_gather(shard_logits_, gathered);
    for (size_t rank = 0; rank < size_t(plan_.world_size); ++rank) {
      for (size_t i = 0; i < count; ++i) {
        std::memcpy(&logits_[i * size_t(config_.vocab_size) + rank * slice],
                    &gathered[(rank * count + i) * slice], slice * sizeof(float));
      }
    }
  }
  logits.values = logits_;
  logits.rows = int64_t(selected.size());
  logits.vocab_size = config_.vocab_size;
}

}  // namespace oscar
