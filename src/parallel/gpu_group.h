#pragma once
// What a rank of a tensor-parallel job on GPUs needs to join its group: the CUDA backend makes an
// NCCL communicator from rank 0's unique id (backend/cuda/nccl_group.h). The ranks meet through
// the TCP bootstrap first (tcp_bootstrap.h), which carries the id.
#include <array>
#include <chrono>
#include <cstddef>
#include <functional>
#include <string>

namespace oscar {

inline constexpr size_t kUniqueIdBytes = 128;  // sizeof(ncclUniqueId)
using UniqueId = std::array<std::byte, kUniqueIdBytes>;

struct GpuGroup {
  int rank = 0;
  int world_size = 1;
  UniqueId unique_id{};  // rank 0's ncclUniqueId, the same bytes on every rank; it makes one group
  // The longest the group waits for a peer: joining, and a step's collectives.
  std::chrono::milliseconds timeout = std::chrono::seconds(120);
  // Asked while the rank waits for its GPU: why a peer failed (it left, or reported an error),
  // or empty while every peer is alive. Null: no peer is watched (ranks as threads of a test).
  std::function<std::string()> peer_failure;
  // Called when this rank's group is torn down by an exception, before it leaves NCCL, so that the
  // peers stop waiting for it at once. Ranks as threads need it: their peers learn of a failure
  // only from it (a process's peers see its sockets close).
  std::function<void()> leaving_on_error;
};

}  // namespace oscar
