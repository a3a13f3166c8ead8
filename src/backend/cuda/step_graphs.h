#pragma once
// CUDA graphs of decode steps, one per batch size and placement of the migration (before the first
// layer or in each layer, LaunchSizes::migrate_first). A decode step launches the same kernels with
// the same grids at every context length (the attention kernels are persistent and read their work
// counts from the device), so the graph recorded for a key replays for every later step with that
// key until a buffer it reads moves (then clear() drops them all).
#include <cuda_runtime.h>

#include <compare>
#include <cstdint>
#include <functional>
#include <map>

namespace oscar::cuda {

struct StepGraphKey {
  int64_t batch = 0;
  bool migrate_first = false;
  auto operator<=>(const StepGraphKey&) const = default;
};

class StepGraphs {
 public:
  StepGraphs() = default;
  StepGraphs(const StepGraphs&) = delete;
  StepGraphs& operator=(const StepGraphs&) = delete;
  ~StepGraphs();

  void clear();
  // Replays the graph of `key`, recording it first from `enqueue` under stream capture.
  void run(StepGraphKey key, cudaStream_t stream, const std::function<void()>& enqueue);

 private:
  std::map<StepGraphKey, cudaGraphExec_t> graphs_;
};

}  // namespace oscar::cuda
