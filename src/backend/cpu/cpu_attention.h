#pragma once
// Causal grouped-query attention of one sequence's new tokens over its paged cache, under the
// decode rule: the query at position t reads token j quantized iff sink <= j < quantized_end(t+1),
// from its 4-bit band copy if also j >= band_begin(t+1), otherwise in full precision
// (kvcache/kv_cache_config.h). The same code serves a prefill chunk,
// a decode step and perplexity evaluation, so they agree exactly.
#include <cstdint>

#include "backend/cpu/cpu_kv_store.h"
#include "kvcache/kv_cache_config.h"
#include "kvcache/sequence_pages.h"
#include "model/model_config.h"

namespace oscar {

struct AttentionRequest {
  int64_t layer = 0;
  const std::vector<LogicalPage>* pages = nullptr;
  int64_t first_position = 0;  // position of the first new token
  int64_t count = 0;           // new tokens (their K/V are already in the cache)
  int64_t full_precision_until = 0;
  const float* queries = nullptr;  // [count][num_heads][head_dim], rotated like the stored keys
  float* output = nullptr;         // [count][num_heads][head_dim]
};

void cpu_attention(const CpuKvStore& store, const KvCacheConfig& kv_config,
                   const ModelConfig& model, const AttentionRequest& request);

}  // namespace oscar
