#pragma once
// One request inside the engine: its tokens (prompt, then generated), its page table, how far
// its KV is computed, its sampler and its text stream.
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/json_object_grammar.h"
#include "engine/prefix_cache.h"
#include "engine/request.h"
#include "engine/sampler.h"
#include "engine/stop_strings.h"
#include "kvcache/sequence_pages.h"
#include "tokenizer/streaming_decoder.h"

namespace oscar {

class Tokenizer;

enum class SequenceState { waiting, running, finished };

struct Sequence {
  Sequence(RequestId id, GenerationRequest request, const Tokenizer* tokenizer);

  RequestId id;
  GenerationRequest request;
  std::vector<int32_t> tokens;  // prompt followed by generated tokens
  SequencePages pages;          // pages.num_tokens(): tokens whose K/V are cached
  SequenceState state = SequenceState::waiting;
  Sampler sampler;
  std::unique_ptr<StreamingDecoder> decoder;  // null without a tokenizer
  StopStringMatcher stop_matcher;
  std::optional<JsonObjectGrammar> json;  // the new text's grammar state, where json_object asked
  std::vector<int32_t> excluded_tokens;   // scratch: the tokens the next draw may not take
  // log p(prompt[i + 1] | prompt[..i]) and the most likely tokens there (where asked for), each
  // position once: a preempted sequence recomputes its prompt without scoring it again.
  std::vector<float> prompt_logprobs;
  std::vector<std::vector<TokenLogprob>> prompt_top_logprobs;
  int64_t cached_prompt_tokens = 0;
  PrefixCache::Cursor cache_cursor;
  int64_t preemptions = 0;
  std::chrono::steady_clock::time_point arrival_time;
  std::chrono::steady_clock::time_point first_token_time;
  std::chrono::steady_clock::time_point last_token_time;
  bool has_first_token = false;

  int64_t prompt_size() const { return int64_t(request.prompt.size()); }
  int64_t generated() const { return int64_t(tokens.size()) - prompt_size(); }
  // Tokens whose K/V still have to be computed before the next token can be sampled.
  int64_t uncomputed() const { return int64_t(tokens.size()) - pages.num_tokens(); }
  // Whether a stop may end it now: min_tokens new tokens are there (the next one drawn may be a
  // stop token; a stop string may end in the text of the last one).
  bool may_stop() const { return generated() >= request.stop.min_tokens; }
  // Whether a chunk from position `start` needs the logits of all its rows: it lies in the prompt
  // and the prompt is not all scored yet (prompt_logprobs requested).
  bool scores_prompt_from(int64_t start) const {
    return request.prompt_logprobs && start < prompt_size() &&
           int64_t(prompt_logprobs.size()) < prompt_size() - 1;
  }
};

}  // namespace oscar
