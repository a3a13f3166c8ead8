#pragma once
// A greedy continuation run straight on a backend, outside the engine: the prompt in one step, then
// one token a step, each the argmax of the last logits. Header-only: only the rooms whose tests
// link the backend include it.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "util/error.h"

namespace oscar::testing {

inline std::vector<int32_t> greedy_continuation(Backend& backend,
                                                const std::vector<int32_t>& prompt, int count) {
  const KvCacheConfig& kv = backend.kv_config();
  KvPagePools pools(backend.kv_capacity());
  SequencePages pages;
  StepLogits logits;
  std::vector<int32_t> generated, next = prompt;
  for (int i = 0; i <= count; ++i) {
    require(pages.reserve(int64_t(next.size()), kv, pools), "greedy: the KV pool is too small");
    const SequenceStep step{next, &pages, false};
    backend.forward({&step, 1}, logits);
    pages.commit(int64_t(next.size()), kv, pools);
    if (i == count) break;
    const float* row = logits.row(0);
    generated.push_back(int32_t(std::max_element(row, row + logits.vocab_size) - row));
    next = {generated.back()};
  }
  return generated;
}

}  // namespace oscar::testing
