#include "engine/engine.h"

#include <algorithm>

#include "kvcache/page_layout.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace oscar {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// What one chunk's logits rows give its sequence.
struct SampledRows {
  int64_t start = 0;      // the chunk's first position
  bool all_rows = false;  // a row of logits for every token of the chunk (prompt log-probabilities)
  int64_t first_row = 0;
  int64_t rows = 0;
  int32_t token = -1;  // -1: nothing sampled
  float logprob = 0;
  std::vector<TokenLogprob> top;  // the most likely tokens at this position, where asked for
  std::string error;              // what went wrong for this sequence alone
};

// A step's logits rows, each cut to the ids that have a token.
struct LogitRows {
  const StepLogits& logits;
  size_t row_size = 0;
  std::span<const float> operator()(int64_t row) const { return {logits.row(row), row_size}; }
};

// The prompt's log-probabilities where asked for, and the next token where the prompt is done.
void score_and_sample(Sequence& sequence, const LogitRows& logits_row,
                      const JsonTokenMask* json_mask, SampledRows& s) {
  if (s.all_rows) {
    const int32_t top = sequence.request.logprobs ? sequence.request.top_logprobs : 0;
    for (int64_t i = 0; i < s.rows; ++i) {
      const int64_t next = s.start + i + 1;
      // Positions already scored (before a preemption) are not scored again.
      if (next < sequence.prompt_size() && size_t(next - 1) == sequence.prompt_logprobs.size()) {
        const std::span<const float> scores = logits_row(s.first_row + i);
        sequence.prompt_logprobs.push_back(token_logprob(scores, sequence.tokens[size_t(next)]));
        if (top > 0) sequence.prompt_top_logprobs.push_back(top_logprobs(scores, top));
      }
    }
  }
  if (sequence.uncomputed() == 0 && sequence.request.stop.max_tokens > 0) {
    const std::span<const float> last = logits_row(s.first_row + s.rows - 1);
    std::vector<int32_t>& excluded = sequence.excluded_tokens;
    excluded.clear();
    if (!sequence.may_stop()) excluded = sequence.request.stop.stop_token_ids;
    if (sequence.json) json_mask->exclude(*sequence.json, excluded);
    s.token =
        sequence.sampler.sample(last, sequence.tokens, size_t(sequence.prompt_size()), excluded);
    if (sequence.request.logprobs) {
      s.logprob = token_logprob(last, s.token);
      s.top = top_logprobs(last, sequence.request.top_logprobs);
    }
  }
}

}  // namespace

Engine::Engine(std::unique_ptr<Backend> backend, const Tokenizer* tokenizer, EngineOptions options)
    : backend_(std::move(backend)),
      tokenizer_(tokenizer),
      options_(options),
      max_model_len_(options.max_model_len > 0 ? options.max_model_len
                                               : backend_->model_config().max_position_embeddings),
      vocabulary_size_(tokenizer != nullptr ? std::min<int64_t>(backend_->model_config().vocab_size,
                                                                tokenizer->vocab_size())
                                            : backend_->model_config().vocab_size),
      pools_(backend_->kv_capacity()) {
  SchedulerHooks hooks;
  if (options_.prefix_caching) {
    prefix_cache_ = std::make_unique<PrefixCache>(backend_->kv_config(), pools_);
    hooks.admit = [this](Sequence& sequence) {
      // Prompt log-probabilities need every prompt position's logits.
      if (sequence.request.full_precision_prefill || sequence.request.prompt_logprobs) return;
      // At least one token must be computed for the logits of the next one.
      const int64_t attached =
          prefix_cache_->attach(sequence.tokens, int64_t(sequence.tokens.size()) - 1,
                                sequence.pages, sequence.cache_cursor);
      const int64_t cached_prompt = std::min(attached, sequence.prompt_size());
      counters_.cached_prompt_tokens += cached_prompt - sequence.cached_prompt_tokens;
      sequence.cached_prompt_tokens = std::max(sequence.cached_prompt_tokens, cached_prompt);
    };
    hooks.reclaim = [this](KvPageCounts needed) { return prefix_cache_->evict(needed); };
    hooks.release = [this](Sequence& sequence) { prefix_cache_->release(sequence.cache_cursor); };
  }
  scheduler_ = std::make_unique<Scheduler>(options_.scheduler, backend_->kv_config(), pools_,
                                           std::move(hooks));
}

Engine::~Engine() = default;

RequestId Engine::submit(GenerationRequest request) {
  const KvCacheConfig& kv = backend_->kv_config();
  auto require_in_vocabulary = [&](int32_t token, const char* field) {
    require(token >= 0 && token < vocabulary_size_,
            "{}: token id {} is outside the vocabulary (0..{})", field, token,
            vocabulary_size_ - 1);
  };
  require(!request.prompt.empty(), "prompt: must hold at least one token");
  for (const int32_t token : request.prompt) require_in_vocabulary(token, "prompt");
  validate(request.sampling);
  for (const auto& [token, bias] : request.sampling.logit_bias)
    require_in_vocabulary(token, "logit_bias");
  for (const int32_t token : request.stop.stop_token_ids)
    require_in_vocabulary(token, "stop_token_ids");
  require(request.top_logprobs >= 0 && request.top_logprobs <= kMaxTopLogprobs,
          "top_logprobs: must lie in [0, {}], got {}", kMaxTopLogprobs, request.top_logprobs);
  require(request.stop.max_tokens >= 1 || (request.stop.max_tokens == 0 && request.prompt_logprobs),
          "max_tokens: must be at least 1, got {}", request.stop.max_tokens);
  require(request.stop.min_tokens >= 0 && request.stop.min_tokens <= request.stop.max_tokens,
          "min_tokens: must lie in [0, max_tokens = {}], got {}", request.stop.max_tokens,
          request.stop.min_tokens);
  const int64_t total = int64_t(request.prompt.size()) + request.stop.max_tokens;
  require(total <= max_model_len_,
          "prompt ({} tokens) + max_tokens ({}) = {} exceeds the maximum context of {} tokens",
          request.prompt.size(), request.stop.max_tokens, total, max_model_len_);
  // The request must fit the pool on its own (with one prefill chunk in flight), or it could
  // never run.
  const KvPageCounts peak = footprint_for_tokens(kv, total);
  const int64_t chunk_pages =
      (options_.scheduler.prefill_chunk_tokens + kv.page_size_tokens - 1) / kv.page_size_tokens + 1;
  const int64_t band_pages = kv.has_band() ? peak.band + chunk_pages : 0;
  require(peak.full + chunk_pages <= pools_.full.capacity() &&
              peak.quantized <= pools_.quantized.capacity() && band_pages <= pools_.band.capacity(),
          "request of {} tokens needs {} full-precision, {} quantized and {} band KV pages; the "
          "pool holds "
          "{}, {} and {} (raise the KV pool size)",
          total, peak.full + chunk_pages, peak.quantized, band_pages, pools_.full.capacity(),
          pools_.quantized.capacity(), pools_.band.capacity());
  if (request.json_object) {
    require(tokenizer_ != nullptr, "response_format json_object: the engine has no tokenizer");
    if (!json_mask_) json_mask_ = std::make_unique<JsonTokenMask>(*tokenizer_, vocabulary_size_);
  }
  const RequestId id = next_id_++;
  auto sequence = std::make_unique<Sequence>(id, std::move(request), tokenizer_);
  scheduler_->add(sequence.get());
  sequences_[id] = std::move(sequence);
  return id;
}

void Engine::cancel(RequestId id) {
  if (sequences_.count(id) != 0) cancelled_.push_back(id);
}

double Engine::kv_cache_usage() const {
  const KvPageCounts reclaimable = prefix_cache_ ? prefix_cache_->unpinned_pages() : KvPageCounts{};
  double usage = 0;
  for (const auto& [pool, cached] : {std::pair{&pools_.full, reclaimable.full},
                                     std::pair{&pools_.quantized, reclaimable.quantized},
                                     std::pair{&pools_.band, reclaimable.band}}) {
    if (pool->capacity() > 0)
      usage = std::max(usage, double(pool->used_pages() - cached) / pool->capacity());
  }
  return usage;
}

RequestOutput Engine::output_for(const Sequence& sequence) const {
  RequestOutput output;
  output.id = sequence.id;
  output.prompt_tokens = sequence.prompt_size();
  output.generated_tokens = sequence.generated();
  output.cached_prompt_tokens = sequence.cached_prompt_tokens;
  return output;
}

void Engine::finish(Sequence& sequence, FinishReason reason, RequestOutput& output) {
  if (reason != FinishReason::cancelled && reason != FinishReason::error) {
    if (sequence.decoder) output.text += sequence.stop_matcher.push(sequence.decoder->flush());
    output.text += sequence.stop_matcher.flush();
  }
  output.finished = true;
  output.finish_reason = reason;
  output.generated_tokens = sequence.generated();
  sequence.state = SequenceState::finished;
  scheduler_->remove(&sequence);
  ++counters_.finished_requests;
}

void Engine::append_token(Sequence& sequence, int32_t token, float logprob,
                          std::vector<TokenLogprob> top, RequestOutput& output) {
  const auto now = std::chrono::steady_clock::now();
  if (!sequence.has_first_token) {
    sequence.has_first_token = true;
    sequence.first_token_time = now;
  }
  sequence.last_token_time = now;
  sequence.tokens.push_back(token);
  output.tokens.push_back(token);
  if (sequence.request.logprobs) output.logprobs.push_back(logprob);
  if (sequence.request.logprobs && sequence.request.top_logprobs > 0)
    output.top_logprobs.push_back(std::move(top));
  output.generated_tokens = sequence.generated();
  ++counters_.generated_tokens;
  const auto& stop_ids = sequence.request.stop.stop_token_ids;
  if (std::find(stop_ids.begin(), stop_ids.end(), token) != stop_ids.end()) {
    finish(sequence, FinishReason::stop, output);
    return;
  }
  // Every token that breaks the grammar is masked; only a row with all of them masked could give
  // one.
  if (sequence.json && !sequence.json->feed(json_mask_->bytes(token))) {
    output.error = "response_format json_object: no token continues the JSON object";
    finish(sequence, FinishReason::error, output);
    return;
  }
  if (sequence.decoder)
    output.text += sequence.stop_matcher.push(sequence.decoder->push(token), sequence.may_stop());
  if (sequence.stop_matcher.stopped() || (sequence.json && sequence.json->complete())) {
    finish(sequence, FinishReason::stop, output);
  } else if (sequence.generated() >= sequence.request.stop.max_tokens ||
             int64_t(sequence.tokens.size()) >= max_model_len_) {
    finish(sequence, FinishReason::length, output);
  }
}

void Engine::fail(Sequence& sequence, const std::string& error,
                  std::vector<RequestOutput>& outputs) {
  RequestOutput output = output_for(sequence);
  output.error = error;
  if (sequence.state != SequenceState::finished) {
    finish(sequence, FinishReason::error, output);
  } else {  // it failed while finishing
    output.finished = true;
    output.finish_reason = FinishReason::error;
  }
  outputs.push_back(std::move(output));
}

std::vector<RequestOutput> Engine::abort_all(const std::string& error) {
  std::vector<RequestOutput> outputs;
  for (auto& entry : sequences_) fail(*entry.second, error, outputs);
  sequences_.clear();
  cancelled_.clear();
  return outputs;
}

void Engine::process_logits(std::span<const ScheduledChunk> plan, const StepLogits& logits,
                            std::vector<RequestOutput>& outputs) {
  // Each chunk's logits rows, and what they give: the prompt's log-probabilities where asked for,
  // and the next token where the prompt is done. Sequences sample apart from each other (each its
  // own generator), so the rows are spread over the host's threads: a row of 151,936 logits is a
  // few hundred microseconds of a core, tens of milliseconds for a batch in one thread.
  std::vector<SampledRows> sampled(plan.size());
  int64_t row = 0;
  for (size_t c = 0; c < plan.size(); ++c) {
    const Sequence& sequence = *plan[c].sequence;
    SampledRows& s = sampled[c];
    s.start = sequence.pages.num_tokens() - plan[c].count;  // after commit
    s.all_rows = sequence.scores_prompt_from(s.start);
    s.first_row = row;
    s.rows = s.all_rows ? plan[c].count : 1;
    row += s.rows;
  }
  // The ids past the tokenizer's (a padded vocabulary) are masked: never sampled, never scored.
  const LogitRows rows{logits, size_t(std::min(logits.vocab_size, vocabulary_size_))};
#pragma omp parallel for schedule(dynamic) if (plan.size() > 1)
  for (size_t c = 0; c < plan.size(); ++c) {
    Sequence& sequence = *plan[c].sequence;
    if (sequence.state == SequenceState::finished) continue;  // failed earlier in the step
    // An exception must not leave the parallel region: that would end the process.
    try {
      score_and_sample(sequence, rows, json_mask_.get(), sampled[c]);
    } catch (const std::exception& error) {
      sampled[c].error = error.what();
    }
  }
  for (size_t c = 0; c < plan.size(); ++c) {
    Sequence& sequence = *plan[c].sequence;
    if (sequence.state == SequenceState::finished) continue;
    if (!sampled[c].error.empty()) {
      fail(sequence, sampled[c].error, outputs);
      continue;
    }
    RequestOutput output = output_for(sequence);
    if (sampled[c].all_rows && sequence.pages.num_tokens() >= sequence.prompt_size()) {
      output.prompt_logprobs = sequence.prompt_logprobs;
      output.prompt_top_logprobs = sequence.prompt_top_logprobs;
    }
    const bool emitted_prompt_logprobs = !output.prompt_logprobs.empty();
    if (sequence.uncomputed() == 0) {
      try {
        if (sequence.request.stop.max_tokens == 0) {
          finish(sequence, FinishReason::length, output);
        } else {
          append_token(sequence, sampled[c].token, sampled[c].logprob, std::move(sampled[c].top),
                       output);
        }
      } catch (const std::exception& error) {
        fail(sequence, error.what(), outputs);  // what this step gave it is not sent
        continue;
      }
    }
    if (!output.tokens.empty() || output.finished || emitted_prompt_logprobs) {
      outputs.push_back(std::move(output));
    }
  }
}

std::vector<RequestOutput> Engine::step() {
  std::vector<RequestOutput> outputs;
  for (const RequestId id : std::exchange(cancelled_, {})) {
    const auto it = sequences_.find(id);
    if (it == sequences_.end()) continue;
    RequestOutput output = output_for(*it->second);
    finish(*it->second, FinishReason::cancelled, output);
    outputs.push_back(std::move(output));
    sequences_.erase(it);
  }
  const std::vector<ScheduledChunk> plan = scheduler_->schedule();
  if (plan.empty()) return outputs;
  run_batch(plan, outputs);
  for (const RequestOutput& output : outputs) {
    if (output.finished) sequences_.erase(output.id);
  }
  return outputs;
}

void Engine::run_batch(std::span<const ScheduledChunk> plan, std::vector<RequestOutput>& outputs) {
  std::vector<SequenceStep> steps;
  bool has_prefill = false, has_decode = false;
  int64_t step_tokens = 0, prompt_tokens = 0;
  for (const ScheduledChunk& chunk : plan) {
    Sequence& sequence = *chunk.sequence;
    const int64_t start = sequence.pages.num_tokens();
    const bool in_prompt = start < sequence.prompt_size() - 1 || chunk.count > 1;
    (in_prompt ? has_prefill : has_decode) = true;
    step_tokens += chunk.count;
    if (in_prompt) prompt_tokens += chunk.count;
    steps.push_back({std::span(sequence.tokens).subspan(size_t(start), size_t(chunk.count)),
                     &sequence.pages, sequence.scores_prompt_from(start)});
  }
  StepLogits logits;
  const auto started = std::chrono::steady_clock::now();
  try {
    backend_->forward(steps, logits);
  } catch (const std::exception& error) {
    // The positions of a failed step are not committed, so the halves write them again.
    if (plan.size() == 1) {
      fail(*plan.front().sequence, error.what(), outputs);
    } else {
      run_batch(plan.first(plan.size() / 2), outputs);
      run_batch(plan.subspan(plan.size() / 2), outputs);
    }
    return;
  }
  const double elapsed = seconds_since(started);
  ++counters_.steps;
  counters_.prompt_tokens_computed += prompt_tokens;
  if (has_prefill && !has_decode) {
    counters_.prefill_seconds += elapsed;
    counters_.prefill_only_tokens += step_tokens;
  } else if (has_decode && !has_prefill) {
    counters_.decode_seconds += elapsed;
    counters_.decode_only_tokens += step_tokens;
  }
  for (const ScheduledChunk& chunk : plan) {
    Sequence& sequence = *chunk.sequence;
    try {
      sequence.pages.commit(chunk.count, backend_->kv_config(), pools_);
      if (prefix_cache_ && !sequence.request.full_precision_prefill) {
        prefix_cache_->insert(sequence.tokens, sequence.pages, sequence.cache_cursor);
      }
    } catch (const std::exception& error) {
      fail(sequence, error.what(), outputs);
    }
  }
  process_logits(plan, logits, outputs);
}

}  // namespace oscar
