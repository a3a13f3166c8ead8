#pragma once
// A backend that fails every step holding a given token and otherwise runs the real one: one
// request whose work throws, among others whose work does not. A fatal one fails every step after
// that too and reports it as Backend::failure(), as a tensor-parallel group whose rank died does.
// Header-only: only the rooms whose tests link the backend include it.
#include <memory>

#include "backend/backend.h"
#include "util/error.h"

namespace oscar::testing {

class FailingBackend : public Backend {
 public:
  FailingBackend(std::unique_ptr<Backend> backend, int32_t failing_token, bool fatal = false)
      : backend_(std::move(backend)), failing_token_(failing_token), fatal_(fatal) {}

  std::string device_name() const override { return backend_->device_name(); }
  const ModelConfig& model_config() const override { return backend_->model_config(); }
  const KvCacheConfig& kv_config() const override { return backend_->kv_config(); }
  const PageLayout& page_layout() const override { return backend_->page_layout(); }
  KvPageCounts kv_capacity() const override { return backend_->kv_capacity(); }

  void forward(std::span<const SequenceStep> steps, StepLogits& logits,
               ActivationObserver* observer) override {
    require(failure_.empty(), "test backend: the group ended: {}", failure_);
    for (const SequenceStep& step : steps) {
      for (const int32_t token : step.tokens) {
        if (token != failing_token_) continue;
        const std::string message = fmt::format("test backend: a step holds token {}", token);
        if (fatal_) failure_ = message;
        fail("{}", message);
      }
    }
    backend_->forward(steps, logits, observer);
  }
  std::string failure() const override { return failure_; }

 private:
  std::unique_ptr<Backend> backend_;
  int32_t failing_token_;
  bool fatal_;
  std::string failure_;
};

}  // namespace oscar::testing
