#include "cli/tensor_parallel_options.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <random>
#include <thread>

#include "backend/planned_step.h"
#include "backend/tensor_parallel_leader.h"
#include "cli/commands.h"
#include "parallel/rank_protocol.h"
#include "parallel/shard_plan.h"
#include "parallel/tcp_communicator.h"
#include "util/error.h"

namespace oscar::cli {
namespace {

// What a launched rank learns from its parent: its local rank and the job's address.
constexpr const char* kLocalRankVariable = "OSCAR_TP_LOCAL_RANK";
constexpr const char* kInitAddressVariable = "OSCAR_TP_INIT_ADDR";

int local_rank_of_this_process() {
  const char* text = std::getenv(kLocalRankVariable);
  if (text == nullptr) return 0;
  char* end = nullptr;
  const long rank = std::strtol(text, &end, 10);
  require(end != text && *end == '\0' && rank >= 0, "{}='{}' is not a rank", kLocalRankVariable,
          text);
  return int(rank);
}

UniqueId random_unique_id() {
  std::random_device source;
  UniqueId id;
  for (std::byte& b : id) b = std::byte(source() & 0xff);
  return id;
}

// This program again as local rank `local_rank`, with the arguments the user gave.
pid_t start_local_rank(int local_rank, const std::string& init_address) {
  const pid_t pid = ::fork();
  require(pid >= 0, "cannot start tensor-parallel rank processes: fork failed");
  if (pid != 0) return pid;
  ::setenv(kLocalRankVariable, std::to_string(local_rank).c_str(), 1);
  ::setenv(kInitAddressVariable, init_address.c_str(), 1);
  const int null_fd = ::open("/dev/null", O_WRONLY);
  if (null_fd >= 0) ::dup2(null_fd, STDOUT_FILENO);
  const std::vector<std::string>& arguments = program_arguments();
  std::vector<char*> argv;
  for (const std::string& argument : arguments) argv.push_back(const_cast<char*>(argument.c_str()));
  argv.push_back(nullptr);
  ::execv("/proc/self/exe", argv.data());
  fmt::print(stderr, "oscar: error: local rank {} could not start: exec failed\n", local_rank);
  ::_exit(127);
}

// Waits for the started ranks to end, at most `timeout`, then kills those left.
void reap(const std::vector<pid_t>& children, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (const pid_t child : children) {
    int status = 0;
    while (::waitpid(child, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(child, SIGKILL);
        ::waitpid(child, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

DistributedOptions distributed_options(const TensorParallelOptions& o, int local_rank) {
  DistributedOptions options;
  options.tensor_parallel_size = o.size;
  options.nnodes = o.nnodes;
  options.node_rank = o.node_rank;
  options.timeout = std::chrono::milliseconds(int64_t(o.timeout_seconds * 1000));
  check_distributed_options(options);
  std::string address = o.dist_init_addr;
  if (const char* inherited = std::getenv(kInitAddressVariable); address.empty() && inherited) {
    address = inherited;
  }
  if (address.empty()) {
    require(o.nnodes == 1,
            "--nnodes {}: give every node the same --dist-init-addr HOST:PORT of "
            "node 0",
            o.nnodes);
    require(local_rank == 0, "local rank {} started without {}", local_rank, kInitAddressVariable);
    TcpSocket probe = listen_on({"127.0.0.1", 0}, 1);
    address = fmt::format("127.0.0.1:{}", bound_port(probe));
  }
  options.init_address = parse_host_port(address);
  return options;
}

// A follower's life: run rank 0's steps until it shuts the job down, then end the program.
[[noreturn]] void follow_steps(RankLinks& links, Backend& backend,
                               const std::vector<pid_t>& children) {
  StepFollower follower(links);
  int code = 0;
  try {
    StepLogits logits;
    while (const std::optional<StepPlan> plan = follower.next_step()) {
      run_planned_step(backend, *plan, logits);
      follower.step_done(plan->step_index);
    }
  } catch (const Error& error) {
    follower.report_failure(error.what());
    fmt::print(stderr, "oscar: error: tensor-parallel rank {}: {}\n", links.rank, error.what());
    code = 1;
  }
  reap(children, links.timeout);
  std::exit(code);
}

}  // namespace

void add_tensor_parallel_options(CLI::App& command, TensorParallelOptions& o) {
  command
      .add_option("--tensor-parallel-size", o.size,
                  "ranks the model is split over, also -tp N: local processes, one a GPU with "
                  "--device cuda")
      ->capture_default_str();
  command.add_option("--dist-init-addr", o.dist_init_addr,
                     "HOST:PORT where rank 0 (node 0) meets the other ranks (default: a free "
                     "local port, one node)");
  command.add_option("--nnodes", o.nnodes, "nodes of a tensor-parallel job")->capture_default_str();
  command.add_option("--node-rank", o.node_rank, "this node's index in 0..nnodes-1")
      ->capture_default_str();
  command
      .add_option("--dist-timeout", o.timeout_seconds,
                  "seconds a rank waits for another (bootstrap, each step) before all end")
      ->capture_default_str();
}

std::vector<std::string> expand_tensor_parallel_alias(int argc, char** argv) {
  std::vector<std::string> arguments(argv, argv + argc);
  for (std::string& argument : arguments) {
    if (argument == "-tp") argument = "--tensor-parallel-size";
    if (argument.starts_with("-tp=")) argument = "--tensor-parallel-size=" + argument.substr(4);
  }
  return arguments;
}

std::unique_ptr<Backend> make_rank_backend(const ModelWeights& weights, BackendOptions options,
                                           const TensorParallelOptions& tensor_parallel) {
  if (tensor_parallel.size == 1 && tensor_parallel.nnodes == 1) {
    return make_backend(weights, options);
  }
  const bool gpu = options.device == DeviceKind::cuda;
  const int local_rank = local_rank_of_this_process();
  const DistributedOptions distributed = distributed_options(tensor_parallel, local_rank);
  check_tensor_parallel(weights.config, tensor_parallel.size);
  if (gpu) use_gpu_of_local_rank(local_rank);  // before this process touches any other GPU
  std::vector<pid_t> children;
  if (local_rank == 0) {
    const std::string address =
        fmt::format("{}:{}", distributed.init_address.host, distributed.init_address.port);
    for (int r = 1; r < ranks_per_node(distributed); ++r) {
      children.push_back(start_local_rank(r, address));
    }
  }
  auto links = std::make_unique<RankLinks>();
  try {
    // Only rank 0's id is used; on GPUs it is NCCL's, which opens NCCL's own listening socket.
    const bool leader = global_rank(distributed, local_rank) == 0;
    const UniqueId id = leader && gpu ? make_gpu_group_id() : random_unique_id();
    *links = bootstrap_ranks(distributed, local_rank, &id);
  } catch (const Error&) {
    reap(children, distributed.timeout);
    throw;
  }
  auto communicator = std::make_unique<TcpCommunicator>(*links);
  // Rank 0's pool sizes: the page ids of its plans must exist on every rank.
  communicator->broadcast(std::as_writable_bytes(std::span(&options.capacity, 1)), 0);
  if (gpu) {
    GpuGroup group;
    group.rank = links->rank;
    group.world_size = links->world_size;
    group.unique_id = links->unique_id;
    group.timeout = distributed.timeout;
    group.peer_failure = [links = links.get()] { return peer_failure(*links); };
    options.gpu_group = group;
  } else {
    options.communicator = communicator.get();
  }
  std::unique_ptr<Backend> backend = make_backend(weights, options);
  if (links->rank != 0) follow_steps(*links, *backend, children);
  const auto timeout = distributed.timeout;
  return std::make_unique<TensorParallelLeader>(std::move(links), std::move(communicator),
                                                std::move(backend),
                                                [children, timeout] { reap(children, timeout); });
}

void check_gpu_bench_tensor_parallel(const TensorParallelOptions& options, const ModelConfig& model,
                                     const std::string& command) {
  if (options.size == 1 && options.nnodes == 1) return;
  check_tensor_parallel(model, options.size);
  require(options.nnodes == 1,
          "{} --nnodes {}: the benches run their ranks as threads of one process, on one node",
          command, options.nnodes);
}

void require_one_rank(const TensorParallelOptions& options, const std::string& command,
                      const std::string& reason) {
  require(options.size == 1 && options.nnodes == 1,
          "{} runs on one rank: --tensor-parallel-size {} {}", command, options.size, reason);
}

}  // namespace oscar::cli
