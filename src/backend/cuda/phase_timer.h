#pragma once
// GPU time of a forward's phases (the benchmarks' profile): a pair of CUDA events around each
// launch sequence of a phase, recorded on the backend's stream, and after the step's
// synchronization the elapsed times summed per phase (or the total's pair alone, PhaseTiming).
// Off by default; off, begin() and end() only test a flag. Never used while a decode step is
// captured into a graph (start(false)).
#include <cuda_runtime.h>

#include <vector>

#include "backend/cuda/cuda_backend.h"

namespace oscar::cuda {

// In the order of ForwardPhaseTimes' fields. kv_quantize and dequantize are timed inside
// kv_write's and attention's intervals: parts of them, not beside them.
enum class ForwardPhase { total, attention, kv_write, linear, kv_quantize, dequantize };

class PhaseTimer {
 public:
  PhaseTimer() = default;
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;
  ~PhaseTimer();

  void set_timing(PhaseTiming timing) { timing_ = timing; }
  // A forward begins: its intervals are recorded when timing is on and `timed`.
  void start(bool timed);
  // Opens an interval of `phase` on `stream`; returns the handle end() takes (-1: not timing).
  int begin(ForwardPhase phase, cudaStream_t stream) {
    const bool timed = active_ && (timing_ == PhaseTiming::phases || phase == ForwardPhase::total);
    return timed ? record_start(phase, stream) : -1;
  }
  void end(int interval, cudaStream_t stream) {
    if (interval >= 0) record_stop(interval, stream);
  }
  // After the stream synchronized: the forward's intervals summed per phase into times().
  void finish();
  // Of the last forward; zeros when it was not timed.
  const ForwardPhaseTimes& times() const { return times_; }

 private:
  int record_start(ForwardPhase phase, cudaStream_t stream);
  void record_stop(int interval, cudaStream_t stream);

  struct Interval {
    ForwardPhase phase = ForwardPhase::total;
    cudaEvent_t start = nullptr;
    cudaEvent_t stop = nullptr;
  };
  std::vector<Interval> intervals_;  // events made as needed, reused by every forward
  size_t used_ = 0;                  // intervals of this forward
  PhaseTiming timing_ = PhaseTiming::off;
  bool active_ = false;
  ForwardPhaseTimes times_;
};

}  // namespace oscar::cuda
