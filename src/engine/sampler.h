#pragma once
// Turning one row of logits into the next token: repetition penalty, frequency and presence
// penalties, logit bias, temperature, top-k, top-p, min-p, then a draw from a per-request seeded
// generator (greedy when temperature is 0). It runs on the host between decode steps, once per
// sequence, so each rule does only the passes over the vocabulary it needs (its cost per row:
// docs/bench/notes/2026-11-27-serve-sampling-json-mask.md).
#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace oscar {

struct SamplingParams {
  float temperature = 1.0f;         // 0: greedy
  int32_t top_k = 0;                // 0: off
  float top_p = 1.0f;               // 1: off
  float min_p = 0.0f;               // 0: off
  float repetition_penalty = 1.0f;  // 1: off; > 1 discourages tokens already present
  // OpenAI's penalties in [-2, 2], over the generated tokens only (as vLLM): each occurrence of a
  // token lowers its logit by frequency_penalty, and its presence by presence_penalty once.
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  // (token, bias) added to the token's logit before the rules above (OpenAI's logit_bias, each in
  // [-100, 100]); tokens beyond the row are not in the vocabulary and take none.
  std::vector<std::pair<int32_t, float>> logit_bias;
  std::optional<uint64_t> seed;  // unset: drawn from the system's entropy
};

// Throws Error naming the parameter when a value is out of range.
void validate(const SamplingParams& params);

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);
  // The next token. `history`: the prompt (its first `prompt_size` tokens) and the tokens generated
  // so far, for the penalties; `excluded`: tokens that may not be drawn now (a request's stop
  // tokens before its min_tokens, JSON mode's masked tokens). Ids beyond the row are ignored. Its
  // log-probability, where a request wants it, is token_logprob's: under the model's distribution,
  // before any rule.
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history,
                 size_t prompt_size = 0, std::span<const int32_t> excluded = {});

 private:
  int32_t sample_full_distribution(std::span<const float> scores);  // softmax at the temperature
  int32_t sample_truncated(std::span<const float> scores);          // top-k, top-p, min-p

  // Candidates top-p and min-p sort first without top-k; 8 times as many while the cut lies beyond.
  static constexpr size_t kFirstHead = 256;

  SamplingParams params_;
  std::mt19937_64 generator_;
  std::vector<float> scratch_;  // the logits with the penalties, bias and exclusions applied
  std::vector<uint8_t>
      generated_;  // per token id: seen among the generated tokens (all 0 between calls)
  std::vector<float> weights_;         // the full distribution's unnormalised probabilities
  std::vector<int32_t> candidates_;    // token ids, sorted by score as far as the rules need
  std::vector<double> probabilities_;  // of the sorted candidates, relative to the most likely
};

// log softmax(logits)[token], computed stably: the log-probability under the model's own
// distribution (before any sampling rule).
float token_logprob(std::span<const float> logits, int32_t token);

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
  bool operator==(const TokenLogprob&) const = default;
};

// The `count` most likely tokens of log softmax(logits), most likely first (ties: lower id first).
std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, int count);

}  // namespace oscar
