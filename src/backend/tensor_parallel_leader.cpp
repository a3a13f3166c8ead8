#include "backend/tensor_parallel_leader.h"

#include "backend/planned_step.h"
#include "util/error.h"

namespace oscar {

TensorParallelLeader::TensorParallelLeader(std::unique_ptr<RankLinks> links,
                                           std::unique_ptr<Communicator> communicator,
                                           std::unique_ptr<Backend> inner,
                                           std::function<void()> on_closed)
    : links_(std::move(links)),
      communicator_(std::move(communicator)),
      inner_(std::move(inner)),
      leader_(*links_),
      on_closed_(std::move(on_closed)) {}

TensorParallelLeader::~TensorParallelLeader() {
  if (failure_.empty()) {
    try {
      leader_.shutdown();
    } catch (const Error&) {
      // A follower already left; closing the connections below ends the others.
    }
  }
  inner_.reset();
  links_.reset();  // closes every connection
  if (on_closed_) on_closed_();
}

std::string TensorParallelLeader::device_name() const {
  return fmt::format("{}, {} ranks as processes", inner_->device_name(), links_->world_size);
}

void TensorParallelLeader::forward(std::span<const SequenceStep> steps, StepLogits& logits,
                                   ActivationObserver* observer) {
  require(observer == nullptr, "activation observers run with one rank, not {}",
          links_->world_size);
  require(failure_.empty(), "the tensor-parallel group ended: {}", failure_);
  const int64_t index = next_step_++;
  try {
    leader_.send_step(plan_of_steps(steps, index));
    inner_->forward(steps, logits, nullptr);
    leader_.wait_step_done(index);
  } catch (const Error& error) {
    failure_ = error.what();
    leader_.report_failure(failure_);
    throw;
  }
}

}  // namespace oscar
