// oscar bench all-reduce -tp N: the all-reduce of a decode step's message (rows x hidden) between
// N GPUs over NCCL, the ranks threads of one process with a GPU each (backend/gpu_rank_threads.h),
// as the tensor-parallel backend runs it. Each size runs on plain device memory and on the group's
// reduce window (NcclGroup::reduce_window: a buffer registered on every rank, where NCCL runs its
// symmetric-memory kernels), in float32 (the backend's residual stream) and in bf16. A time is per
// all-reduce: a CUDA graph of --iterations all-reduces, as a decode step's graph holds them,
// replayed five times after a warm-up replay, median, on rank 0's GPU.
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "cli/bench_gpu_common.h"
#include "cli/commands.h"
#include "cli/tensor_parallel_options.h"
#include "util/error.h"

#ifdef OSCAR_HAVE_CUDA
#include <cuda_runtime.h>

#include "backend/cuda/device_buffer.h"
#include "backend/cuda/nccl_group.h"
#include "backend/gpu_rank_threads.h"
#endif

namespace oscar::cli {
namespace {

struct BenchAllReduceOptions {
  int64_t hidden = 5120;  // Qwen3-32B's hidden size, the message
  std::string rows = "1,2,4,8,16,32,64,128,256,1024,8192";
  int iterations = 64;
  std::string json_path;
  TensorParallelOptions tensor_parallel;
};

#ifdef OSCAR_HAVE_CUDA
using namespace oscar::cuda;

struct Case {
  int64_t rows;
  bool bf16;
  bool window;
};

// Microseconds per all-reduce of `c` on `values` (rank 0's GPU time; every rank runs the same
// calls, which meet inside NCCL).
double time_all_reduce(NcclGroup& group, void* values, const Case& c, int64_t hidden,
                       int iterations, cudaStream_t stream) {
  const int64_t count = c.rows * hidden;
  auto enqueue = [&] {
    if (c.bf16) {
      group.all_reduce_sum_bf16(values, count, stream);
    } else {
      group.all_reduce_sum(static_cast<float*>(values), count, stream);
    }
  };
  for (int i = 0; i < 3; ++i) enqueue();
  group.synchronize(stream, "all-reduce warm-up");
  cudaGraph_t graph = nullptr;
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed), "cudaStreamBeginCapture");
  for (int i = 0; i < iterations; ++i) enqueue();
  check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
  cudaGraphExec_t exec = nullptr;
  check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  cudaGraphDestroy(graph);
  cudaEvent_t start = nullptr, stop = nullptr;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  check(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
  group.synchronize(stream, "all-reduce graph");
  std::vector<double> times;
  for (int run = 0; run < 5; ++run) {
    check(cudaEventRecord(start, stream), "cudaEventRecord");
    check(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
    check(cudaEventRecord(stop, stream), "cudaEventRecord");
    group.synchronize(stream, "all-reduce graph");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    times.push_back(double(ms) * 1e3 / iterations);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaGraphExecDestroy(exec);
  return median(times);
}

void run_rank(const BenchAllReduceOptions& o, const GpuGroup& options,
              std::vector<nlohmann::json>& rows) {
  const bool leader = options.rank == 0;
  const std::vector<int64_t> row_counts = parse_int_list(o.rows);
  const int64_t largest = *std::max_element(row_counts.begin(), row_counts.end());
  NcclGroup group(options);
  DeviceBuffer<float> plain(size_t(largest * o.hidden));
  float* window = group.reduce_window(largest * o.hidden);
  check(cudaMemset(plain.data(), 0, plain.bytes()), "cudaMemset");
  if (window != nullptr) {
    check(cudaMemset(window, 0, size_t(largest * o.hidden) * sizeof(float)), "cudaMemset");
  }
  if (leader && window == nullptr) {
    fmt::print("no reduce window (NCCL older than 2.27, or OSCAR_NCCL_SYMMETRIC=0)\n");
  }
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  for (const int64_t r : row_counts) {
    for (const bool bf16 : {false, true}) {
      for (const bool in_window : {false, true}) {
        if (in_window && window == nullptr) continue;
        const Case c{r, bf16, in_window};
        void* values = in_window ? static_cast<void*>(window) : static_cast<void*>(plain.data());
        const double us = time_all_reduce(group, values, c, o.hidden, o.iterations, stream);
        const int64_t bytes = r * o.hidden * (bf16 ? 2 : 4);
        const int n = options.world_size;
        // NCCL's bus bandwidth of an all-reduce: each rank sends and receives 2 (n - 1) / n of it.
        const double bus_gbps = double(bytes) * 2.0 * (n - 1) / n / (us * 1e-6) / 1e9;
        if (!leader) continue;
        fmt::print("  {:>5} rows x {} {:>4} {:<6}: {:8.2f} us, bus {:7.1f} GB/s\n", r, o.hidden,
                   bf16 ? "bf16" : "f32", in_window ? "window" : "plain", us, bus_gbps);
        rows.push_back({{"kernel", "all_reduce"},
                        {"tensor_parallel_size", n},
                        {"rows", r},
                        {"hidden", o.hidden},
                        {"dtype", bf16 ? "bf16" : "f32"},
                        {"buffer", in_window ? "symmetric_window" : "plain"},
                        {"bytes", bytes},
                        {"time_us", us},
                        {"bus_gbps", bus_gbps}});
      }
    }
  }
  cudaStreamDestroy(stream);
}

void run_bench_all_reduce(const BenchAllReduceOptions& o) {
  const int tp = o.tensor_parallel.size;
  require(tp >= 2, "oscar bench all-reduce: --tensor-parallel-size must be 2 or more, got {}", tp);
  require(o.tensor_parallel.nnodes == 1,
          "oscar bench all-reduce --nnodes {}: the ranks are threads of one process, on one node",
          o.tensor_parallel.nnodes);
  require(o.hidden > 0 && o.iterations > 0, "oscar bench all-reduce: --hidden {} --iterations {}",
          o.hidden, o.iterations);
  require(nccl_available(),
          "oscar bench all-reduce: this oscar was built without NCCL (nccl.h and libnccl were not "
          "found when it was configured)");
  const GpuDescription gpu = describe_gpu();
  fmt::print("{} ({}), all-reduce over {} GPUs, NCCL in graphs of {} calls\n", gpu.name, gpu.driver,
             tp, o.iterations);
  std::vector<nlohmann::json> rows;
  run_gpu_ranks_as_threads(tp, [&](const GpuGroup& group) { run_rank(o, group, rows); });
  write_rows(o.json_path, gpu, rows);
}
#else
void run_bench_all_reduce(const BenchAllReduceOptions&) {
  fail("oscar bench all-reduce: this oscar was built without the CUDA backend");
}
#endif

}  // namespace

void register_bench_all_reduce(CLI::App& bench) {
  auto options = std::make_shared<BenchAllReduceOptions>();
  CLI::App* command = bench.add_subcommand(
      "all-reduce", "GPU all-reduce of decode-size messages over NCCL, plain and symmetric");
  command->add_option("--hidden", options->hidden, "the message's columns")->capture_default_str();
  command->add_option("--rows", options->rows, "the message's rows, a list")->capture_default_str();
  command->add_option("--iterations", options->iterations, "all-reduces in one timed graph")
      ->capture_default_str();
  command->add_option("--json", options->json_path, "write the rows as JSON");
  add_tensor_parallel_options(*command, options->tensor_parallel);
  command->callback([options] { run_bench_all_reduce(*options); });
}

}  // namespace oscar::cli
