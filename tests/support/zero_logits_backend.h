#pragma once
// A backend that computes nothing: every step returns zero logits for the rows it asks for. The
// engine's bookkeeping (scheduler, pages, prefix cache) then runs at any scale in milliseconds,
// as it would beside a real model, where what the model computes does not matter.
// Header-only: only the rooms whose tests link the backend include it.
#include <string>
#include <vector>

#include "backend/backend.h"
#include "kvcache/page_layout.h"

namespace oscar::testing {

class ZeroLogitsBackend : public Backend {
 public:
  ZeroLogitsBackend(const KvCacheConfig& kv, KvPageCounts capacity, int64_t vocab_size = 64)
      : kv_(kv), capacity_(capacity), layout_(make_page_layout(kv, 8, 128)) {
    config_.vocab_size = vocab_size;
    config_.max_position_embeddings = 1 << 20;
    config_.num_heads = 32;
    config_.num_kv_heads = 8;
    config_.head_dim = 128;
  }

  std::string device_name() const override { return "zero logits"; }
  const ModelConfig& model_config() const override { return config_; }
  const KvCacheConfig& kv_config() const override { return kv_; }
  const PageLayout& page_layout() const override { return layout_; }
  KvPageCounts kv_capacity() const override { return capacity_; }

  void forward(std::span<const SequenceStep> steps, StepLogits& logits,
               ActivationObserver*) override {
    int64_t rows = 0;
    for (const SequenceStep& step : steps)
      rows += step.all_logits ? int64_t(step.tokens.size()) : 1;
    values_.assign(size_t(rows * config_.vocab_size), 0.0f);
    logits.values = values_;
    logits.rows = rows;
    logits.vocab_size = config_.vocab_size;
  }

 private:
  KvCacheConfig kv_;
  KvPageCounts capacity_;
  ModelConfig config_;
  PageLayout layout_;
  std::vector<float> values_;
};

}  // namespace oscar::testing
