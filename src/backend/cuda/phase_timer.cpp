#include "backend/cuda/phase_timer.h"

#include <array>

#include "backend/cuda/cuda_check.h"

namespace oscar::cuda {

PhaseTimer::~PhaseTimer() {
  for (const Interval& interval : intervals_) {
    if (interval.start != nullptr) cudaEventDestroy(interval.start);
    if (interval.stop != nullptr) cudaEventDestroy(interval.stop);
  }
}

void PhaseTimer::start(bool timed) {
  active_ = timing_ != PhaseTiming::off && timed;
  used_ = 0;
  times_ = {};
}

int PhaseTimer::record_start(ForwardPhase phase, cudaStream_t stream) {
  if (used_ == intervals_.size()) {
    Interval interval;
    check(cudaEventCreate(&interval.start), "cudaEventCreate(phase timer)");
    const cudaError_t status = cudaEventCreate(&interval.stop);
    if (status != cudaSuccess) cudaEventDestroy(interval.start);
    check(status, "cudaEventCreate(phase timer)");
    intervals_.push_back(interval);
  }
  Interval& interval = intervals_[used_];
  interval.phase = phase;
  check(cudaEventRecord(interval.start, stream), "cudaEventRecord(phase timer)");
  return int(used_++);
}

void PhaseTimer::record_stop(int interval, cudaStream_t stream) {
  check(cudaEventRecord(intervals_[size_t(interval)].stop, stream), "cudaEventRecord(phase timer)");
}

void PhaseTimer::finish() {
  std::array<double, 6> sums{};  // by ForwardPhase, in ForwardPhaseTimes' order
  for (size_t i = 0; i < used_; ++i) {
    float milliseconds = 0;
    check(cudaEventElapsedTime(&milliseconds, intervals_[i].start, intervals_[i].stop),
          "cudaEventElapsedTime(phase timer)");
    sums[size_t(intervals_[i].phase)] += milliseconds;
  }
  times_ = {sums[0], sums[1], sums[2], sums[3], sums[4], sums[5]};
  used_ = 0;
  active_ = false;
}

}  // namespace oscar::cuda
