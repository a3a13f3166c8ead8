#include "engine/sampler.h"

#include <Eigen/Core>

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
  require(
      std::isfinite(p.repetition_penalty) && p.repetition_penalty > 0 && p.repetition_penalty <= 10,
      "repetition_penalty must lie in (0, 10], got {}", p.repetition_penalty);
  require(std::isfinite(p.frequency_penalty) && std::abs(p.frequency_penalty) <= 2,
          "frequency_penalty must lie in [-2, 2], got {}", p.frequency_penalty);
  require(std::isfinite(p.presence_penalty) && std::abs(p.presence_penalty) <= 2,
          "presence_penalty must lie in [-2, 2], got {}", p.presence_penalty);
  for (const auto& [token, bias] : p.logit_bias) {
    require(token >= 0, "logit_bias token ids must be >= 0, got {}", token);
    require(std::isfinite(bias) && bias >= -100 && bias <= 100,
            "logit_bias values must lie in [-100, 100], got {}", bias);
  }
}

namespace {

using FloatArray = Eigen::Map<const Eigen::ArrayXf>;

FloatArray as_array(std::span<const float> values) {
  return FloatArray(values.data(), Eigen::Index(values.size()));
}

// sum_i exp((values_i - top) * scale), `top` the largest value. Eigen's exp is vectorized, where a
// double std::exp per token was most of a greedy row's sampling time.
float sum_exp_below(std::span<const float> values, float top, float scale) {
  return ((as_array(values) - top) * scale).exp().sum();
}

// The first index of the largest value. (Where a value is NaN, maxCoeff's answer is unspecified and
// may be found nowhere: std::max_element's token then, a valid id whatever the row holds.)
int32_t argmax(std::span<const float> values) {
  const float top = as_array(values).maxCoeff();
  const auto found = std::find(values.begin(), values.end(), top);
  return int32_t((found != values.end() ? found : std::max_element(values.begin(), values.end())) -
                 values.begin());
}

}  // namespace

float token_logprob(std::span<const float> logits, int32_t token) {
  const float top = as_array(logits).maxCoeff();
  return logits[size_t(token)] - top - std::log(sum_exp_below(logits, top, 1.0f));
}

std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, int count) {
  const size_t keep = std::min(logits.size(), size_t(std::max(count, 0)));
  if (keep == 0) return {};
  // One pass keeping the best `keep` in order (a few of 151,936): cheaper than sorting ids.
  auto better = [](const TokenLogprob& a, const TokenLogprob& b) {
    return a.logprob > b.logprob || (a.logprob == b.logprob && a.token < b.token);
  };
  std::vector<TokenLogprob> best;
  best.reserve(keep + 1);
  for (size_t i = 0; i < logits.size(); ++i) {
    const TokenLogprob candidate{int32_t(i), logits[i]};
    if (best.size() == keep && !better(candidate, best.back())) continue;
    best.insert(std::upper_bound(best.begin(), best.end(), candidate, better), candidate);
    if (best.size() > keep) best.pop_back();
  }
  // As token_logprob computes it, to the last bit: the sampled token's value is the same in both.
  const float top = as_array(logits).maxCoeff();
  const float log_sum = std::log(sum_exp_below(logits, top, 1.0f));
  for (TokenLogprob& entry : best) entry.logprob = entry.logprob - top - log_sum;
  return best;
}

Sampler::Sampler(const SamplingParams& params)
    : params_(params), generator_(params.seed ? *params.seed : std::random_device{}()) {
  validate(params_);
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history,
                        size_t prompt_size, std::span<const int32_t> excluded) {
  // The rules read `scores`: the logits, or a copy with the penalties, the bias and the exclusions
  // applied (in that order, the penalties in vLLM's).
  std::span<const float> scores = logits;
  const bool openai_penalties =
      params_.frequency_penalty != 0.0f || params_.presence_penalty != 0.0f;
  if (params_.repetition_penalty != 1.0f || openai_penalties || !params_.logit_bias.empty() ||
      !excluded.empty()) {
    scratch_.assign(logits.begin(), logits.end());
    if (params_.repetition_penalty != 1.0f) {
      // CTRL-style penalty (as in transformers and vLLM): shrink positive logits, grow negative
      // ones.
      for (const int32_t token : history) {
        if (token < 0 || size_t(token) >= scratch_.size()) continue;
        float& v = scratch_[size_t(token)];
        v = v > 0 ? v / params_.repetition_penalty : v * params_.repetition_penalty;
      }
    }
    if (openai_penalties) {
      const std::span<const int32_t> generated =
          history.subspan(std::min(prompt_size, history.size()));
      generated_.resize(scratch_.size());
      for (const int32_t token : generated) {
        if (token < 0 || size_t(token) >= scratch_.size()) continue;
        scratch_[size_t(token)] -= params_.frequency_penalty;
        if (!generated_[size_t(token)]) scratch_[size_t(token)] -= params_.presence_penalty;
        generated_[size_t(token)] = 1;
      }
      for (const int32_t token : generated) {
        if (token >= 0 && size_t(token) < generated_.size()) generated_[size_t(token)] = 0;
      }
    }
    for (const auto& [token, bias] : params_.logit_bias) {
      if (size_t(token) < scratch_.size()) scratch_[size_t(token)] += bias;
    }
    // The lowest finite value rather than -inf: the rules subtract the row's largest score, which
    // stays finite even if every token were excluded.
    for (const int32_t token : excluded) {
      if (token >= 0 && size_t(token) < scratch_.size())
        scratch_[size_t(token)] = std::numeric_limits<float>::lowest();
    }
    scores = scratch_;
  }
  if (params_.temperature == 0.0f) return argmax(scores);
  if (params_.top_k == 0 && params_.top_p >= 1.0f && params_.min_p == 0.0f)
    return sample_full_distribution(scores);
  return sample_truncated(scores);
}

int32_t Sampler::sample_truncated(std::span<const float> scores) {
  const size_t vocab = scores.size();
  const float top = as_array(scores).maxCoeff();
  const double inverse_temperature = 1.0 / params_.temperature;
  // Candidates sorted by score (ties by token id), cut by top-k. Without top-k, top-p and min-p
  // need only the head of that order: it is sorted `head` candidates at a time, growing until the
  // cut falls inside it (a full sort of a 151,936-token vocabulary cost more than the GPU step).
  // Top-p's mass is
  // over the top-k candidates, or over the whole vocabulary without top-k.
  const size_t keep = params_.top_k > 0 ? std::min(vocab, size_t(params_.top_k)) : vocab;
  const double vocabulary_total =
      params_.top_k == 0 && params_.top_p < 1.0f
          ? double(sum_exp_below(scores, top, float(inverse_temperature)))
          : 0.0;
  auto by_score = [&](int32_t a, int32_t b) {
    return scores[size_t(a)] > scores[size_t(b)] ||
           (scores[size_t(a)] == scores[size_t(b)] && a < b);
  };
  candidates_.resize(vocab);
  std::iota(candidates_.begin(), candidates_.end(), 0);
  size_t head = std::min(keep, kFirstHead);
  size_t cut = 0;
  for (;;) {
    std::partial_sort(candidates_.begin(), candidates_.begin() + long(head), candidates_.end(),
                      by_score);
    probabilities_.resize(head);
    for (size_t i = 0; i < head; ++i) {
      probabilities_[i] =
          std::exp(double(scores[size_t(candidates_[i])] - top) * inverse_temperature);
    }
    cut = head;
    // min-p: drop tokens less likely than min_p times the most likely one.
    if (params_.min_p > 0) {
      const double threshold = params_.min_p * probabilities_[0];
      cut = size_t(std::find_if(probabilities_.begin(), probabilities_.end(),
                                [&](double p) { return p < threshold; }) -
                   probabilities_.begin());
    }
    // top-p: the smallest prefix whose mass reaches top_p.
    if (params_.top_p < 1.0f) {
      const double total = params_.top_k > 0
                               ? std::accumulate(probabilities_.begin(), probabilities_.end(), 0.0)
                               : vocabulary_total;
      double mass = 0;
      for (size_t i = 0; i < cut; ++i) {
        mass += probabilities_[i] / total;
        if (mass >= params_.top_p) {
          cut = i + 1;
          break;
        }
      }
    }
    if (cut < head || head == keep) break;
    head = std::min(keep, head * 8);
  }
  cut = std::max<size_t>(cut, 1);
  double kept_total = 0;
  for (size_t i = 0; i < cut; ++i) kept_total += probabilities_[i];
  const double draw = std::uniform_real_distribution<double>(0.0, kept_total)(generator_);
  double running = 0;
  for (size_t i = 0; i < cut; ++i) {
    running += probabilities_[i];
    if (draw < running) return candidates_[i];
  }
  return candidates_[cut - 1];
}

int32_t Sampler::sample_full_distribution(std::span<const float> scores) {
  const float top = as_array(scores).maxCoeff();
  weights_.resize(scores.size());
  Eigen::Map<Eigen::ArrayXf>(weights_.data(), Eigen::Index(weights_.size())) =
      ((as_array(scores) - top) * (1.0f / params_.temperature)).exp();
  double total = 0;
  for (const float w : weights_) total += w;
  const double draw = std::uniform_real_distribution<double>(0.0, total)(generator_);
  double running = 0;
  for (size_t i = 0; i < weights_.size(); ++i) {
    running += weights_[i];
    if (draw < running) return int32_t(i);
  }
  return int32_t(weights_.size() - 1);
}

}  // namespace oscar
