#pragma once
// Turning one row of logits into the next token: repetition penalty, temperature, top-k, top-p,
// min-p, then a draw from a per-request seeded generator (greedy when temperature is 0).
#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <vector>

namespace oscar {

struct SamplingParams {
  float temperature = 1.0f;         // 0: greedy
  int32_t top_k = 0;                // 0: off
  float top_p = 1.0f;               // 1: off
  float min_p = 0.0f;               // 0: off
  float repetition_penalty = 1.0f;  // 1: off; > 1 discourages tokens already present
  std::optional<uint64_t> seed;     // unset: drawn from the system's entropy
};

// Throws Error naming the parameter when a value is out of range.
void validate(const SamplingParams& params);

struct SampledToken {
  int32_t token = 0;
  float logprob = 0;  // log-probability under the model's own distribution (before sampling rules)
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);
  // `history`: the prompt and the tokens generated so far (for the repetition penalty).
  SampledToken sample(std::span<const float> logits, std::span<const int32_t> history);

 private:
  int32_t sample_full_distribution();  // softmax over scratch_ at the temperature, no truncation

  SamplingParams params_;
  std::mt19937_64 generator_;
  std::vector<float> scratch_;
  std::vector<int32_t> candidates_;
};

// log softmax(logits)[token], computed stably.
float token_logprob(std::span<const float> logits, int32_t token);

}  // namespace oscar
