#include "backend/sequence_runner.h"

#include <algorithm>

#include "util/error.h"

namespace oscar {

std::vector<float> run_sequence(Backend& backend, std::span<const int32_t> tokens,
                                const SequenceRunOptions& options) {
  require(options.chunk_tokens > 0, "run_sequence: chunk_tokens must be positive");
  const KvCacheConfig& kv = backend.kv_config();
  const KvPageCounts capacity = backend.kv_capacity();
  KvPagePools pools(capacity);
  SequencePages pages(options.full_precision_until);
  std::vector<float> kept;
  StepLogits logits;
  for (size_t start = 0; start < tokens.size(); start += size_t(options.chunk_tokens)) {
    const size_t count = std::min(size_t(options.chunk_tokens), tokens.size() - start);
    require(pages.reserve(int64_t(count), kv, pools),
            "run_sequence: the KV pool ({} full, {} quantized pages) cannot hold {} tokens",
            capacity.full, capacity.quantized, start + count);
    const SequenceStep step{tokens.subspan(start, count), &pages, options.all_logits};
    backend.forward({&step, 1}, logits, options.observer);
    pages.commit(int64_t(count), kv, pools);
    if (options.all_logits) {
      kept.insert(kept.end(), logits.values.begin(), logits.values.end());
    } else {
      kept.assign(logits.values.begin(), logits.values.end());
    }
  }
  return kept;
}

}  // namespace oscar
