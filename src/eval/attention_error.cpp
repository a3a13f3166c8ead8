#include "eval/attention_error.h"

#include "backend/activation_recorder.h"
#include "backend/sequence_runner.h"
#include "quant/error_feedback.h"
#include "quant/hadamard.h"
#include "quant/quantization_error.h"
#include "util/error.h"
#include "util/half.h"
#include "util/parallel.h"

namespace oscar {
namespace {

// The key and value rotations a method applies to one head (null: none).
std::pair<const float*, const float*> rotations_for(const AttentionErrorMethod& m,
                                                    const std::vector<float>& hadamard,
                                                    int64_t layer, int64_t kv_head) {
  switch (m.kv.method) {
    case KvMethod::quarot:
      return {hadamard.data(), hadamard.data()};
    case KvMethod::oscar:
      require(m.rotations != nullptr, "{}: needs a rotations file", m.name);
      return {m.rotations->key_rotation(layer, kv_head),
              m.rotations->value_rotation(layer, kv_head)};
    default:
      return {nullptr, nullptr};
  }
}

}  // namespace

std::vector<LayerAttentionError> evaluate_attention_error(
    Backend& backend, const std::vector<int32_t>& tokens,
    const std::vector<AttentionErrorMethod>& methods, int64_t query_stride) {
  const ModelConfig& config = backend.model_config();
  require(!backend.kv_config().quantized(),
          "attention error needs a full-precision reference cache");
  ActivationRecorder recorder(config);
  run_sequence(backend, tokens, {.chunk_tokens = 512, .observer = &recorder});
  const int64_t d = config.head_dim;
  const int64_t group = config.group_size();
  const auto hadamard_double = hadamard_matrix(d);
  const std::vector<float> hadamard(hadamard_double.begin(), hadamard_double.end());
  std::vector<std::vector<float>> key_feedback(
      methods.size());  // per method, as the caches round keys
  for (size_t i = 0; i < methods.size(); ++i) {
    if (!methods[i].kv.key_error_feedback) continue;
    require(methods[i].rotations != nullptr, "{}: key error feedback needs a rotations file",
            methods[i].name);
    key_feedback[i] = key_feedback_factors(*methods[i].rotations);
  }
  std::vector<LayerAttentionError> results(methods.size() * size_t(config.num_layers));
  parallel_for(
      0, int64_t(results.size()),
      [&](int64_t index) {
        const size_t method = size_t(index) / size_t(config.num_layers);
        const AttentionErrorMethod& m = methods[method];
        const int64_t layer = index % config.num_layers;
        const int64_t count = recorder.tokens(layer);
        LayerAttentionError& out = results[size_t(index)];
        out.method = m.name;
        out.layer = layer;
        for (int64_t h = 0; h < config.num_kv_heads; ++h) {
          const auto q =
              head_rows(recorder.queries(layer), count, config.num_heads, h * group, group, d);
          const auto k = head_rows(recorder.keys(layer), count, config.num_kv_heads, h, 1, d);
          const auto v = head_rows(recorder.values(layer), count, config.num_kv_heads, h, 1, d);
          std::vector<float> k_hat = k, v_hat = v;
          if (m.kv.dtype == KvDtype::bf16) {
            for (float& x : k_hat) x = round_to_bf16(x);
            for (float& x : v_hat) x = round_to_bf16(x);
          } else if (m.kv.quantized()) {
            const auto [key_rotation, value_rotation] = rotations_for(m, hadamard, layer, h);
            const size_t factor = size_t((layer * config.num_kv_heads + h) * d * d);
            const RowCodec key_codec{
                m.kv.bits(),
                m.kv.group_size,
                m.kv.param_format,
                m.kv.key_clip(),
                m.kv.keys_per_channel(),
                key_feedback[method].empty() ? nullptr : &key_feedback[method][factor]};
            const RowCodec value_codec{
                m.kv.bits(),
                m.kv.group_size,
                m.kv.param_format,
                m.kv.value_clip(),
                false,
                m.value_feedback.empty() ? nullptr : &m.value_feedback[factor]};
            k_hat = quantize_round_trip(k.data(), count, d, key_rotation, key_codec);
            v_hat = quantize_round_trip(v.data(), count, d, value_rotation, value_codec);
          }
          const AttentionError e =
              attention_error(q.data(), group, k.data(), v.data(), k_hat.data(), v_hat.data(),
                              count, d, query_stride);
          out.logits += e.logits / double(config.num_kv_heads);
          out.outputs += e.outputs / double(config.num_kv_heads);
        }
      },
      /*dynamic_schedule=*/true);
  return results;
}

}  // namespace oscar
