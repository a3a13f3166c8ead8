#include "backend/cuda/step_graphs.h"

#include "backend/cuda/cuda_check.h"

namespace oscar::cuda {

StepGraphs::~StepGraphs() {
  clear();
}

void StepGraphs::clear() {
  for (auto& [key, graph] : graphs_) cudaGraphExecDestroy(graph);
  graphs_.clear();
}

void StepGraphs::run(StepGraphKey key, cudaStream_t stream, const std::function<void()>& enqueue) {
  auto found = graphs_.find(key);
  if (found == graphs_.end()) {
    // Relaxed: cuBLAS queries kernel attributes while the step is recorded.
    check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed), "cudaStreamBeginCapture");
    cudaGraph_t graph = nullptr;
    try {
      enqueue();
    } catch (...) {
      cudaStreamEndCapture(stream, &graph);
      if (graph != nullptr) cudaGraphDestroy(graph);
      throw;
    }
    check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
    cudaGraphExec_t exec = nullptr;
    const cudaError_t status = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    check(status, "cudaGraphInstantiate");
    found = graphs_.emplace(key, exec).first;
  }
  check(cudaGraphLaunch(found->second, stream), "cudaGraphLaunch");
}

}  // namespace oscar::cuda
