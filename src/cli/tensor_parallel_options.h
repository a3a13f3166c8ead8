#pragma once
// -tp/--tensor-parallel-size and the flags of a multi-node job (SGLang's --dist-init-addr,
// --nnodes, --node-rank), and building the backend of this process's rank. oscar launches one
// process per rank itself: the process the user starts on a node is its local rank 0 and starts
// the node's other ranks (this program again, same arguments, OSCAR_TP_LOCAL_RANK set; their
// stdout discarded). Rank 0 owns the engine; the others follow its step plans and exit when it
// shuts down, so no command runs past building its backend on them.
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "backend/backend.h"
#include "model/model_weights.h"

namespace oscar::cli {

struct TensorParallelOptions {
  int size = 1;
  std::string dist_init_addr;  // empty: 127.0.0.1 and a free port (one node only)
  int nnodes = 1;
  int node_rank = 0;
  double timeout_seconds = 120;
};

void add_tensor_parallel_options(CLI::App& command, TensorParallelOptions& options);
// The arguments with vLLM's -tp N spelt --tensor-parallel-size N (CLI11 takes no multi-letter
// options after one dash).
std::vector<std::string> expand_tensor_parallel_alias(int argc, char** argv);

// The backend of this process's rank: make_backend with one rank. With several ranks the ranks are
// processes that meet over TCP (parallel/tcp_bootstrap.h): the CPU backend's collectives run over
// TCP (parallel/tcp_communicator.h), the CUDA backend's over NCCL, local rank r on GPU r. Rank 0
// gets the engine's backend; on every other rank this runs the steps and then ends the program.
std::unique_ptr<Backend> make_rank_backend(const ModelWeights& weights, BackendOptions options,
                                           const TensorParallelOptions& tensor_parallel);

// The GPU benches whose ranks are threads (backend/gpu_rank_threads.h): checks that tp splits
// `model` and that the job is one node.
void check_gpu_bench_tensor_parallel(const TensorParallelOptions& options, const ModelConfig& model,
                                     const std::string& command);

// For the commands that run one rank only: Error naming the command and why when tp > 1.
void require_one_rank(const TensorParallelOptions& options, const std::string& command,
                      const std::string& reason);

}  // namespace oscar::cli
