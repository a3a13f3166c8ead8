#pragma once
// A backend that fails every step holding a given token and otherwise runs the real one: one
// request whose work throws, among others whose work does not.
// Header-only: only the rooms whose tests link the backend include it.
#include <memory>

#include "backend/backend.h"
#include "util/error.h"

namespace oscar::testing {

class FailingBackend : public Backend {
 public:
  FailingBackend(std::unique_ptr<Backend> backend, int32_t failing_token)
      : backend_(std::move(backend)), failing_token_(failing_token) {}

  std::string device_name() const override { return backend_->device_name(); }
  const ModelConfig& model_config() const override { return backend_->model_config(); }
  const KvCacheConfig& kv_config() const override { return backend_->kv_config(); }
  const PageLayout& page_layout() const override { return backend_->page_layout(); }
  KvPageCounts kv_capacity() const override { return backend_->kv_capacity(); }

  void forward(std::span<const SequenceStep> steps, StepLogits& logits,
               ActivationObserver* observer) override {
    for (const SequenceStep& step : steps) {
      for (const int32_t token : step.tokens) {
        if (token == failing_token_) fail("test backend: a step holds token {}", failing_token_);
      }
    }
    backend_->forward(steps, logits, observer);
  }

 private:
  std::unique_ptr<Backend> backend_;
  int32_t failing_token_;
};

}  // namespace oscar::testing
