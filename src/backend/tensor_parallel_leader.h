#pragma once
// Rank 0's backend in a tensor-parallel job whose ranks are processes: each forward sends the step
// plan to the followers (parallel/rank_protocol.h), runs rank 0's shard (whose collectives meet
// the followers'), and waits for every follower's step_done. The first failure, of rank 0 or of a
// follower, is reported to the others and ends the group: later forwards throw it again. Closing
// (the destructor) shuts the followers down and runs `on_closed` (the launcher reaps them).
#include <functional>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "parallel/communicator.h"
#include "parallel/rank_protocol.h"

namespace oscar {

class TensorParallelLeader final : public Backend {
 public:
  // `inner` is rank 0's shard, built over `communicator`, which runs over `links`.
  TensorParallelLeader(std::unique_ptr<RankLinks> links, std::unique_ptr<Communicator> communicator,
                       std::unique_ptr<Backend> inner, std::function<void()> on_closed);
  ~TensorParallelLeader() override;

  std::string device_name() const override;
  const ModelConfig& model_config() const override { return inner_->model_config(); }
  const KvCacheConfig& kv_config() const override { return inner_->kv_config(); }
  const PageLayout& page_layout() const override { return inner_->page_layout(); }
  KvPageCounts kv_capacity() const override { return inner_->kv_capacity(); }
  void forward(std::span<const SequenceStep> steps, StepLogits& logits,
               ActivationObserver* observer) override;
  std::string failure() const override { return failure_; }

 private:
  std::unique_ptr<RankLinks> links_;
  std::unique_ptr<Communicator> communicator_;
  std::unique_ptr<Backend> inner_;
  StepLeader leader_;
  std::function<void()> on_closed_;
  int64_t next_step_ = 0;
  std::string failure_;  // the error that ended the group, if one did
};

}  // namespace oscar
