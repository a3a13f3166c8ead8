#pragma once
// CUDA graphs of decode steps, one per batch size. A decode step launches the same kernels with the
// same grids at every context length (the attention kernels are persistent and read their work
// counts from the device), so the graph recorded for a batch size replays for every later step of
// that size until a buffer it reads moves (then clear() drops them all).
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <map>

namespace oscar::cuda {

class StepGraphs {
 public:
  StepGraphs() = default;
  StepGraphs(const StepGraphs&) = delete;
  StepGraphs& operator=(const StepGraphs&) = delete;
  ~StepGraphs();

  void clear();
  // Replays the graph of `batch`, recording it first from `enqueue` under stream capture.
  void run(int64_t batch, cudaStream_t stream, const std::function<void()>& enqueue);

 private:
  std::map<int64_t, cudaGraphExec_t> graphs_;
};

}  // namespace oscar::cuda
