#include "calibration/calibrate.h"

#include <algorithm>

#include "backend/activation_recorder.h"
#include "backend/sequence_runner.h"
#include "calibration/calibration_observers.h"
#include "calibration/rotation_builder.h"
#include "quant/hadamard.h"
#include "quant/quantization_error.h"
#include "util/error.h"
#include "util/parallel.h"
#include "util/progress_bar.h"

namespace oscar {
namespace {

void run_pass(Backend& backend, const std::vector<std::vector<int32_t>>& sequences,
              ActivationObserver& observer, const CalibrationOptions& options, const char* label) {
  int64_t total = 0;
  for (const auto& sequence : sequences) total += int64_t(sequence.size());
  ProgressBar progress(label, total, "tok");
  for (const auto& sequence : sequences) {
    run_sequence(backend, sequence, {.chunk_tokens = options.chunk_tokens, .observer = &observer});
    if (options.show_progress) progress.advance(int64_t(sequence.size()));
  }
  if (options.show_progress) progress.finish();
}

// Per-layer scope: every head of a layer gets the head-averaged matrix.
std::vector<std::vector<double>> covariances(const OuterProductSums& sums,
                                             const ModelConfig& config, bool per_head) {
  std::vector<std::vector<double>> result;
  for (int64_t slot = 0; slot < sums.num_slots(); ++slot) result.push_back(sums.mean(slot));
  if (per_head) return result;
  const int64_t heads = config.num_kv_heads;
  for (int64_t layer = 0; layer < config.num_layers; ++layer) {
    std::vector<double> average(result[size_t(layer * heads)].size(), 0.0);
    for (int64_t h = 0; h < heads; ++h) {
      const auto& c = result[size_t(layer * heads + h)];
      for (size_t i = 0; i < c.size(); ++i) average[i] += c[i] / double(heads);
    }
    for (int64_t h = 0; h < heads; ++h) result[size_t(layer * heads + h)] = average;
  }
  return result;
}

void store_rotations(const std::vector<std::vector<double>>& matrices, const ModelConfig& config,
                     bool per_head, std::vector<float>& rotations, std::vector<float>& eigenvalues,
                     double& max_error) {
  const int64_t d = config.head_dim;
  const int64_t stride = per_head ? 1 : config.num_kv_heads;
  std::vector<SpectralRotation> built(matrices.size() / size_t(stride));
  parallel_for(0, int64_t(built.size()), [&](int64_t i) {
    built[size_t(i)] = spectral_rotation(matrices[size_t(i * stride)], d);
  });
  for (const SpectralRotation& r : built) {
    const size_t first = rotations.size();
    for (const double v : r.rotation) rotations.push_back(float(v));
    for (const double v : r.eigenvalues) eigenvalues.push_back(float(v));
    max_error = std::max(max_error, orthogonality_error(&rotations[first], d));
  }
}

std::vector<LayerErrorReport> held_out_errors(const ActivationRecorder& recorder,
                                              const KvRotations& oscar, const ModelConfig& config,
                                              const CalibrationOptions& options) {
  const int64_t d = config.head_dim;
  const int64_t group = config.group_size();
  const auto hadamard_double = hadamard_matrix(d);
  const std::vector<float> hadamard(hadamard_double.begin(), hadamard_double.end());
  const RowCodec key_codec{
      options.bits, options.group_size, options.param_format, {options.clip_ratio_k}};
  const RowCodec value_codec{
      options.bits, options.group_size, options.param_format, {options.clip_ratio_v}};
  std::vector<LayerErrorReport> reports(size_t(config.num_layers));
  parallel_for(0, config.num_layers, [&](int64_t layer) {
    const int64_t tokens = recorder.tokens(layer);
    LayerErrorReport& report = reports[size_t(layer)];
    for (int64_t h = 0; h < config.num_kv_heads; ++h) {
      const auto q =
          head_rows(recorder.queries(layer), tokens, config.num_heads, h * group, group, d);
      const auto k = head_rows(recorder.keys(layer), tokens, config.num_kv_heads, h, 1, d);
      const auto v = head_rows(recorder.values(layer), tokens, config.num_kv_heads, h, 1, d);
      auto errors = [&](const float* key_rotation, const float* value_rotation) {
        const auto k_hat = quantize_round_trip(k.data(), tokens, d, key_rotation, key_codec);
        const auto v_hat = quantize_round_trip(v.data(), tokens, d, value_rotation, value_codec);
        return attention_error(q.data(), group, k.data(), v.data(), k_hat.data(), v_hat.data(),
                               tokens, d, /*query_stride=*/4);
      };
      const AttentionError with_oscar =
          errors(oscar.key_rotation(layer, h), oscar.value_rotation(layer, h));
      const AttentionError with_hadamard = errors(hadamard.data(), hadamard.data());
      const double n = double(config.num_kv_heads);
      report.oscar_logits += with_oscar.logits / n;
      report.oscar_outputs += with_oscar.outputs / n;
      report.hadamard_logits += with_hadamard.logits / n;
      report.hadamard_outputs += with_hadamard.outputs / n;
    }
  });
  return reports;
}

}  // namespace

CalibrationResult calibrate(Backend& backend, const std::vector<std::vector<int32_t>>& sequences,
                            std::span<const int32_t> held_out, const CalibrationOptions& options) {
  const ModelConfig& config = backend.model_config();
  const KvCacheConfig& kv = backend.kv_config();
  require(!kv.quantized(), "calibration needs a full-precision cache (got {})", describe(kv));
  require(!sequences.empty(), "calibration needs at least one sequence");

  QueryCovarianceObserver queries(config);
  run_pass(backend, sequences, queries, options, "calibrate: pass 1/2, query covariance");
  auto query_covariance = covariances(queries.sums(), config, options.per_head);
  ValueCovarianceObserver values(config, query_covariance);
  run_pass(backend, sequences, values, options, "calibrate: pass 2/2, value covariance");
  const auto value_covariance = covariances(values.sums(), config, options.per_head);

  CalibrationResult result;
  KvRotations& r = result.rotations;
  r.num_layers = config.num_layers;
  r.num_kv_heads = config.num_kv_heads;
  r.head_dim = config.head_dim;
  r.per_head = options.per_head && config.num_kv_heads > 1;
  store_rotations(query_covariance, config, r.per_head, r.key, r.key_eigenvalues,
                  result.max_orthogonality_error);
  store_rotations(value_covariance, config, r.per_head, r.value, r.value_eigenvalues,
                  result.max_orthogonality_error);
  for (const auto& sequence : sequences) result.calibration_tokens += int64_t(sequence.size());
  r.metadata = {{"method", "oscar"},
                {"group_size", std::to_string(options.group_size)},
                {"clip_ratio_k", fmt::format("{:.4f}", options.clip_ratio_k)},
                {"clip_ratio_v", fmt::format("{:.4f}", options.clip_ratio_v)},
                {"calibration_tokens", std::to_string(result.calibration_tokens)}};

  if (!held_out.empty()) {
    ActivationRecorder recorder(config);
    run_sequence(backend, held_out, {.chunk_tokens = options.chunk_tokens, .observer = &recorder});
    result.layers = held_out_errors(recorder, r, config, options);
  }
  return result;
}

}  // namespace oscar
