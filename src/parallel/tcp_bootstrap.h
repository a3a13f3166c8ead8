#pragma once
// How the ranks of a tensor-parallel job find each other (SGLang's convention): every process is
// started with the same --dist-init-addr host:port, --nnodes and --tensor-parallel-size, and its
// --node-rank; a node runs tp / nnodes ranks, rank = node_rank * (tp / nnodes) + local_rank. Rank 0
// listens at the address, the others connect and say who they are; rank 0 checks that every rank
// came once, then sends each the job's unique id (opaque: NCCL's ncclUniqueId, from which the
// ranks create their communicator) and the rank table. The connections stay open for the rank
// protocol (parallel/rank_protocol.h). A rank missing at the timeout, a duplicate, or a rank
// whose job differs ends the bootstrap with an Error on every rank.
#include <array>
#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "parallel/gpu_group.h"
#include "parallel/tcp_socket.h"

namespace oscar {

struct DistributedOptions {
  HostPort init_address;  // --dist-init-addr
  int tensor_parallel_size = 1;
  int nnodes = 1;
  int node_rank = 0;
  // The longest wait for a peer: the bootstrap as a whole, and each message within a step.
  std::chrono::milliseconds timeout = std::chrono::seconds(120);
};

// Error naming the flag when the options do not describe a job (node rank out of range, tp not a
// multiple of nnodes).
void check_distributed_options(const DistributedOptions& options);
int ranks_per_node(const DistributedOptions& options);
int global_rank(const DistributedOptions& options, int local_rank);

struct RankInfo {
  int rank = 0;
  int node_rank = 0;
  int local_rank = 0;  // the GPU it uses on its node
  int64_t process_id = 0;
  std::string host_name;
};

// What a bootstrap leaves each rank: who is who, the unique id, and its open connections.
struct RankLinks {
  int rank = 0;
  int world_size = 1;
  std::chrono::milliseconds timeout{0};
  UniqueId unique_id{};
  std::vector<RankInfo> ranks;       // by rank
  std::vector<TcpSocket> followers;  // rank 0 only: followers[r - 1] is rank r
  TcpSocket leader;                  // other ranks: rank 0
};

// Rank 0 passes the unique id it made; the others pass nothing and receive it.
RankLinks bootstrap_ranks(const DistributedOptions& options, int local_rank,
                          const UniqueId* unique_id);

// The peer's name in messages: "rank 2 (node 1, pid 4242)".
std::string describe_rank(const RankLinks& links, int rank);

}  // namespace oscar
