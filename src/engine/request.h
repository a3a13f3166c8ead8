#pragma once
// What a caller asks the engine for, and what it gets back step by step.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/sampler.h"

namespace oscar {

using RequestId = int64_t;

struct StopCriteria {
  int64_t max_tokens = 256;
  std::vector<int32_t> stop_token_ids;  // usually the model's EOS ids
  std::vector<std::string> stop_strings;
  // No stop token is drawn and no stop string ends the generation before this many new tokens
  // (vLLM's min_tokens): the stop tokens' logits are masked until then.
  int64_t min_tokens = 0;
  bool include_stop_string =
      false;  // vLLM's include_stop_str_in_output: the text keeps the stop string
};

// The most likely tokens a request may ask for at each new token (OpenAI's chat limit).
inline constexpr int32_t kMaxTopLogprobs = 20;

struct GenerationRequest {
  std::vector<int32_t> prompt;
  SamplingParams sampling;
  StopCriteria stop;
  bool logprobs = false;  // report each new token's log-probability (RequestOutput::logprobs)
  int32_t top_logprobs =
      0;  // with logprobs: also the most likely tokens at each new token, this many
  // Report log p(prompt[i] | prompt[<i]) (perplexity, echo), with the top_logprobs most likely
  // tokens at each where logprobs is set. The prompt is then computed whole (no prefix-cache hit).
  bool prompt_logprobs = false;
  // The prompt attends to itself in full precision; the cache is quantized before decoding
  // (needle-in-a-haystack "bf16 prefill"). Otherwise every position follows the decode rule.
  bool full_precision_prefill = false;
  // OpenAI's JSON mode: the new text is one JSON object, and the sequence ends when it closes
  // (engine/json_object_grammar.h). Needs the engine's tokenizer.
  bool json_object = false;
  bool skip_special_tokens = true;  // special tokens add no text (vLLM's default)
};

enum class FinishReason { none, length, stop, cancelled, error };
std::string_view to_string(FinishReason reason);

struct RequestOutput {
  RequestId id = 0;
  std::vector<int32_t> tokens;  // new tokens this step
  std::vector<float> logprobs;  // one per new token, where the request asked for them
  std::vector<std::vector<TokenLogprob>> top_logprobs;  // one list per new token, where asked for
  std::string text;                    // new text (complete UTF-8 characters, stop strings removed)
  std::vector<float> prompt_logprobs;  // once, when the prompt is done (prompt_logprobs requested)
  std::vector<std::vector<TokenLogprob>>
      prompt_top_logprobs;  // with them, where top_logprobs asked
  bool finished = false;
  FinishReason finish_reason = FinishReason::none;
  std::string error;  // when finish_reason == error
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  int64_t cached_prompt_tokens = 0;  // prompt tokens served by the prefix cache
};

}  // namespace oscar
