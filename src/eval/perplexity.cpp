#include "eval/perplexity.h"

#include <cmath>
#include <map>

#include "util/error.h"

namespace oscar {

PerplexityResult evaluate_perplexity(Engine& engine, const std::vector<int32_t>& tokens,
                                     const PerplexityOptions& options) {
  require(options.context_tokens >= 2, "--context must be at least 2 tokens");
  require(options.windows >= 1, "--windows must be at least 1");
  const int64_t needed = options.context_tokens * options.windows;
  require(int64_t(tokens.size()) >= needed, "the text has {} tokens; {} windows of {} need {}",
          tokens.size(), options.windows, options.context_tokens, needed);
  std::map<RequestId, size_t> window_of;
  for (int64_t w = 0; w < options.windows; ++w) {
    GenerationRequest request;
    const auto begin = tokens.begin() + long(w * options.context_tokens);
    request.prompt.assign(begin, begin + long(options.context_tokens));
    request.prompt_logprobs = true;
    request.stop.max_tokens = 0;
    window_of[engine.submit(std::move(request))] = size_t(w);
  }
  std::vector<double> nll(size_t(options.windows), 0.0);
  std::vector<int64_t> counted(size_t(options.windows), 0);
  while (!engine.idle()) {
    for (const RequestOutput& output : engine.step()) {
      require(output.finish_reason != FinishReason::error, "perplexity window failed: {}",
              output.error);
      const size_t w = window_of.at(output.id);
      for (const float logprob : output.prompt_logprobs) nll[w] -= logprob;
      counted[w] += int64_t(output.prompt_logprobs.size());
    }
  }
  PerplexityResult result;
  double total = 0;
  for (size_t w = 0; w < nll.size(); ++w) {
    require(counted[w] == options.context_tokens - 1, "window {} scored {} of {} tokens", w,
            counted[w], options.context_tokens - 1);
    total += nll[w];
    result.scored_tokens += counted[w];
    result.window_perplexity.push_back(std::exp(nll[w] / double(counted[w])));
  }
  result.perplexity = std::exp(total / double(result.scored_tokens));
  double mean = 0, squares = 0;
  for (const double p : result.window_perplexity) mean += p / double(nll.size());
  for (const double p : result.window_perplexity) squares += (p - mean) * (p - mean);
  result.window_std = nll.size() > 1 ? std::sqrt(squares / double(nll.size() - 1)) : 0.0;
  return result;
}

}  // namespace oscar
