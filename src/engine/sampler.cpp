#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "util/error.h"

namespace oscar {

void validate(const SamplingParams& p) {
  require(std::isfinite(p.temperature) && p.temperature >= 0 && p.temperature <= 100,
          "temperature must lie in [0, 100], got {}", p.temperature);
  require(p.top_k >= 0, "top_k must be >= 0, got {}", p.top_k);
  require(p.top_p > 0 && p.top_p <= 1, "top_p must lie in (0, 1], got {}", p.top_p);
  require(p.min_p >= 0 && p.min_p <= 1, "min_p must lie in [0, 1], got {}", p.min_p);
  require(std::isfinite(p.repetition_penalty) && p.repetition_penalty > 0 &&
              p.repetition_penalty <= 10,
          "repetition_penalty must lie in (0, 10], got {}", p.repetition_penalty);
}

float token_logprob(std::span<const float> logits, int32_t token) {
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (const float v : logits) sum += std::exp(double(v - max_logit));
  return float(double(logits[size_t(token)] - max_logit) - std::log(sum));
}

Sampler::Sampler(const SamplingParams& params)
    : params_(params), generator_(params.seed ? *params.seed : std::random_device{}()) {
  validate(params_);
}

SampledToken Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
  scratch_.assign(logits.begin(), logits.end());
  if (params_.repetition_penalty != 1.0f) {
    // CTRL-style penalty (as in transformers and vLLM): shrink positive logits, grow negative ones.
    for (const int32_t token : history) {
      if (token < 0 || size_t(token) >= scratch_.size()) continue;
      float& v = scratch_[size_t(token)];
      v = v > 0 ? v / params_.repetition_penalty : v * params_.repetition_penalty;
    }
  }
  SampledToken result;
  if (params_.temperature == 0.0f) {
    result.token = int32_t(std::max_element(scratch_.begin(), scratch_.end()) - scratch_.begin());
    result.logprob = token_logprob(logits, result.token);
    return result;
  }
  if (params_.top_k == 0 && params_.top_p >= 1.0f && params_.min_p == 0.0f) {
    result.token = sample_full_distribution();
    result.logprob = token_logprob(logits, result.token);
    return result;
  }
  // Candidates sorted by logit, cut by top-k; then probabilities at the temperature.
  candidates_.resize(scratch_.size());
  std::iota(candidates_.begin(), candidates_.end(), 0);
  size_t keep = candidates_.size();
  if (params_.top_k > 0) keep = std::min(keep, size_t(params_.top_k));
  auto by_logit = [&](int32_t a, int32_t b) {
    return scratch_[size_t(a)] > scratch_[size_t(b)] || (scratch_[size_t(a)] == scratch_[size_t(b)] && a < b);
  };
  std::partial_sort(candidates_.begin(), candidates_.begin() + long(keep), candidates_.end(), by_logit);
  candidates_.resize(keep);
  const float top = scratch_[size_t(candidates_[0])];
  std::vector<double> probabilities(keep);
  double total = 0;
  for (size_t i = 0; i < keep; ++i) {
    probabilities[i] = std::exp(double(scratch_[size_t(candidates_[i])] - top) / params_.temperature);
    total += probabilities[i];
  }
  // min-p: drop tokens less likely than min_p times the most likely one.
  size_t cut = keep;
  if (params_.min_p > 0) {
    const double threshold = params_.min_p * probabilities[0];
    cut = size_t(std::find_if(probabilities.begin(), probabilities.end(),
                              [&](double p) { return p < threshold; }) - probabilities.begin());
  }
  // top-p: the smallest prefix whose mass reaches top_p.
  if (params_.top_p < 1.0f) {
    double mass = 0;
    for (size_t i = 0; i < cut; ++i) {
      mass += probabilities[i] / total;
      if (mass >= params_.top_p) {
        cut = i + 1;
        break;
      }
    }
  }
  cut = std::max<size_t>(cut, 1);
  double kept_total = 0;
  for (size_t i = 0; i < cut; ++i) kept_total += probabilities[i];
  const double draw = std::uniform_real_distribution<double>(0.0, kept_total)(generator_);
  double running = 0;
  size_t chosen = cut - 1;
  for (size_t i = 0; i < cut; ++i) {
    running += probabilities[i];
    if (draw < running) {
      chosen = i;
      break;
    }
  }
  result.token = candidates_[chosen];
  result.logprob = token_logprob(logits, result.token);
  return result;
}

int32_t Sampler::sample_full_distribution() {
  const float top = *std::max_element(scratch_.begin(), scratch_.end());
  double total = 0;
  for (float& v : scratch_) {
    v = float(std::exp(double(v - top) / params_.temperature));
    total += v;
  }
  const double draw = std::uniform_real_distribution<double>(0.0, total)(generator_);
  double running = 0;
  for (size_t i = 0; i < scratch_.size(); ++i) {
    running += scratch_[i];
    if (draw < running) return int32_t(i);
  }
  return int32_t(scratch_.size() - 1);
}

}  // namespace oscar
