#pragma once
// The engine: requests in, tokens out. Owns the backend, the page pools, the scheduler and the
// sequences; each step() runs one scheduled batch through the backend, samples, detokenizes and
// applies stop rules. Single-threaded: the server drives it from one thread.
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "engine/prefix_cache.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "kvcache/page_pool.h"

namespace oscar {

class Tokenizer;

struct EngineOptions {
  SchedulerOptions scheduler;
  int64_t max_model_len = 0;  // 0: the model's max_position_embeddings
  bool prefix_caching = true;
};

struct EngineCounters {
  int64_t prompt_tokens_computed = 0;  // prefill tokens run through the model
  int64_t generated_tokens = 0;
  int64_t steps = 0;
  double prefill_seconds = 0;  // steps that held only prefill work
  double decode_seconds = 0;   // steps that held only decode work
  int64_t prefill_only_tokens = 0;
  int64_t decode_only_tokens = 0;
  int64_t cached_prompt_tokens = 0;
  int64_t finished_requests = 0;
};

class Engine {
 public:
  Engine(std::unique_ptr<Backend> backend, const Tokenizer* tokenizer, EngineOptions options);
  ~Engine();

  // Checks and queues a request; throws Error (naming the field) when it can never be served.
  RequestId submit(GenerationRequest request);
  void cancel(RequestId id);  // its pages return to the pool at the next step
  std::vector<RequestOutput> step();
  bool idle() const { return sequences_.empty(); }

  Backend& backend() { return *backend_; }
  const KvPagePools& pools() const { return pools_; }
  const Scheduler& scheduler() const { return *scheduler_; }
  const PrefixCache* prefix_cache() const { return prefix_cache_.get(); }
  // Drops every cached prefix no request is using (the pools return to their idle baseline).
  void reset_prefix_cache() {
    if (prefix_cache_) prefix_cache_->evict_unpinned();
  }
  // 0-1: the share of the fullest pool's pages that requests hold. Cached prefixes that no request
  // uses count as free, as vLLM counts them: the cache gives them up when the pages are needed.
  double kv_cache_usage() const;
  const EngineCounters& counters() const { return counters_; }
  int64_t max_model_len() const { return max_model_len_; }
  // The ids that have a token: a padded vocabulary's logit rows are longer (Qwen3's config says
  // 151,936 ids, its tokenizer has 151,669), and the ids past the tokenizer's are never sampled.
  int64_t vocabulary_size() const { return vocabulary_size_; }

  // Ends every request in flight with `error` (a failure that no single request is at fault for)
  // and returns their outputs; the engine then serves new requests.
  std::vector<RequestOutput> abort_all(const std::string& error);

 private:
  // Runs a batch through the backend, then samples. When the backend fails, each half of the batch
  // runs again alone, so that only the request at fault ends with the error.
  void run_batch(std::span<const ScheduledChunk> plan, std::vector<RequestOutput>& outputs);
  void process_logits(std::span<const ScheduledChunk> plan, const StepLogits& logits,
                      std::vector<RequestOutput>& outputs);
  // Ends one request with the error it met; the others go on.
  void fail(Sequence& sequence, const std::string& error, std::vector<RequestOutput>& outputs);
  // `logprob`: the token's log-probability, `top` the most likely tokens there, reported where the
  // request asked for them.
  void append_token(Sequence& sequence, int32_t token, float logprob, std::vector<TokenLogprob> top,
                    RequestOutput& output);
  void finish(Sequence& sequence, FinishReason reason, RequestOutput& output);
  RequestOutput output_for(const Sequence& sequence) const;

  std::unique_ptr<Backend> backend_;
  const Tokenizer* tokenizer_;
  std::unique_ptr<JsonTokenMask> json_mask_;  // made for the first json_object request
  EngineOptions options_;
  int64_t max_model_len_;
  int64_t vocabulary_size_;
  KvPagePools pools_;
  std::unique_ptr<PrefixCache> prefix_cache_;  // after pools_: returns its pages on destruction
  std::unique_ptr<Scheduler> scheduler_;
  std::map<RequestId, std::unique_ptr<Sequence>> sequences_;
  std::vector<RequestId> cancelled_;
  RequestId next_id_ = 1;
  EngineCounters counters_;
};

}  // namespace oscar
