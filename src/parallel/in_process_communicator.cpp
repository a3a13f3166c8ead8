#include "parallel/in_process_communicator.h"

#include <cstring>

#include "util/error.h"

namespace oscar {

class InProcessCommunicator final : public Communicator {
 public:
  InProcessCommunicator(InProcessGroup& group, int rank) : group_(group), rank_(rank) {}
  int rank() const override { return rank_; }
  int world_size() const override { return group_.world_size(); }

  void all_reduce_sum(std::span<float> values) override {
    publish(values.data());
    // Summed in rank order from rank 0's values, so every rank gets the same bits.
    std::vector<float> sum(values.size());
    for (int r = 0; r < world_size(); ++r) {
      const float* other = static_cast<const float*>(group_.buffers_[size_t(r)]);
      for (size_t i = 0; i < sum.size(); ++i) sum[i] = r == 0 ? other[i] : sum[i] + other[i];
    }
    group_.wait_for_all(rank_);
    std::memcpy(values.data(), sum.data(), sum.size() * sizeof(float));
  }

  void all_gather(std::span<const float> mine, std::span<float> gathered) override {
    require(gathered.size() == mine.size() * size_t(world_size()),
            "all_gather: {} values gathered from {} ranks of {} each", gathered.size(),
            world_size(), mine.size());
    publish(mine.data());
    for (int r = 0; r < world_size(); ++r) {
      std::memcpy(gathered.data() + size_t(r) * mine.size(), group_.buffers_[size_t(r)],
                  mine.size() * sizeof(float));
    }
    group_.wait_for_all(rank_);
  }

  void broadcast(std::span<std::byte> bytes, int root) override {
    require(root >= 0 && root < world_size(), "broadcast from rank {} in a group of {}", root,
            world_size());
    publish(bytes.data());
    if (rank_ != root) std::memcpy(bytes.data(), group_.buffers_[size_t(root)], bytes.size());
    group_.wait_for_all(rank_);
  }

 private:
  void publish(const void* buffer) {
    {
      std::lock_guard lock(group_.mutex_);
      group_.buffers_[size_t(rank_)] = buffer;
    }
    group_.wait_for_all(rank_);
  }

  InProcessGroup& group_;
  int rank_;
};

InProcessGroup::InProcessGroup(int world_size, std::chrono::milliseconds timeout)
    : world_size_(world_size), timeout_(timeout), buffers_(size_t(world_size)) {
  require(world_size >= 1, "an in-process group needs at least one rank (got {})", world_size);
}

std::unique_ptr<Communicator> InProcessGroup::communicator(int rank) {
  require(rank >= 0 && rank < world_size_, "rank {} outside an in-process group of {}", rank,
          world_size_);
  return std::make_unique<InProcessCommunicator>(*this, rank);
}

void InProcessGroup::abort(const std::string& reason) {
  std::lock_guard lock(mutex_);
  if (abort_reason_.empty()) abort_reason_ = reason;
  changed_.notify_all();
}

void InProcessGroup::wait_for_all(int rank) {
  std::unique_lock lock(mutex_);
  require(abort_reason_.empty(), "rank {}: the tensor-parallel group ended: {}", rank,
          abort_reason_);
  const long generation = generation_;
  if (++arrived_ == world_size_) {
    arrived_ = 0;
    ++generation_;
    changed_.notify_all();
    return;
  }
  const bool released = changed_.wait_for(
      lock, timeout_, [&] { return generation_ != generation || !abort_reason_.empty(); });
  if (generation_ != generation) return;
  if (released) fail("rank {}: the tensor-parallel group ended: {}", rank, abort_reason_);
  abort_reason_ = fmt::format("rank {} waited {} ms for the other ranks", rank, timeout_.count());
  changed_.notify_all();
  fail("rank {}: the tensor-parallel group ended: {}", rank, abort_reason_);
}

}  // namespace oscar
