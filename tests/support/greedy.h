#pragma once
// A continuation run straight on a backend, outside the engine: the prompt in one step, then one
// token a step, each the argmax of the last logits (greedy) or the next token of a given path
// (teacher forcing, so that two backends can be compared step by step past a flipped near-tie).
// Header-only: only the rooms whose tests link the backend include it.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "util/error.h"

namespace oscar::testing {

struct Continuation {
  std::vector<int32_t> tokens;  // the argmax of each step's logits
  std::vector<float> logits;    // [count][vocab]: row i is the step that chose tokens[i]
};

// `count` steps after the prompt; step i + 1 is fed forced[i] when `forced` is given, else
// tokens[i].
inline Continuation continue_sequence(Backend& backend, const std::vector<int32_t>& prompt,
                                      int count, const std::vector<int32_t>* forced = nullptr) {
  require(forced == nullptr || forced->size() >= size_t(count), "continuation: path too short");
  const KvCacheConfig& kv = backend.kv_config();
  KvPagePools pools(backend.kv_capacity());
  SequencePages pages;
  StepLogits logits;
  Continuation result;
  std::vector<int32_t> next = prompt;
  for (int i = 0; i <= count; ++i) {
    require(pages.reserve(int64_t(next.size()), kv, pools), "greedy: the KV pool is too small");
    const SequenceStep step{next, &pages, false};
    backend.forward({&step, 1}, logits);
    pages.commit(int64_t(next.size()), kv, pools);
    if (i == count) break;
    const float* row = logits.row(0);
    result.logits.insert(result.logits.end(), row, row + logits.vocab_size);
    result.tokens.push_back(int32_t(std::max_element(row, row + logits.vocab_size) - row));
    next = {forced != nullptr ? (*forced)[size_t(i)] : result.tokens.back()};
  }
  return result;
}

inline std::vector<int32_t> greedy_continuation(Backend& backend,
                                                const std::vector<int32_t>& prompt, int count) {
  return continue_sequence(backend, prompt, count).tokens;
}

}  // namespace oscar::testing
