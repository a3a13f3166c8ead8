#pragma once
// Perplexity over fixed windows of a token stream, with decode semantics: every position of a
// window attends to the sink and its recent window in full precision and to the rest of its
// history quantized, exactly as during generation (the engine's decode rule; prefill chunking
// does not change the result).
#include <cstdint>
#include <vector>

#include "engine/engine.h"

namespace oscar {

struct PerplexityOptions {
  int64_t context_tokens = 4096;  // tokens per window
  int64_t windows = 8;
};

struct PerplexityResult {
  double perplexity = 0;                  // exp(mean negative log-likelihood) over every window
  int64_t scored_tokens = 0;              // predictions scored (context_tokens - 1 per window)
  std::vector<double> window_perplexity;  // per window, for the spread
  double window_std = 0;                  // standard deviation of window perplexities
};

// Scores the first `windows` non-overlapping windows of `tokens` (all in one batch).
PerplexityResult evaluate_perplexity(Engine& engine, const std::vector<int32_t>& tokens,
                                     const PerplexityOptions& options);

}  // namespace oscar
