#pragma once
// A Communicator over the bootstrap's connections, for ranks that are processes without GPUs (the
// CPU backend): a star through rank 0, which sums in rank order (every rank gets the same bits)
// and sends the result back. Every wait is bounded by the job's timeout; a rank that left is an
// Error naming it. The CUDA backend's communicator is NCCL's, created from the same unique id.
#include "parallel/communicator.h"
#include "parallel/tcp_bootstrap.h"

namespace oscar {

class TcpCommunicator final : public Communicator {
 public:
  explicit TcpCommunicator(RankLinks& links) : links_(links) {}
  int rank() const override { return links_.rank; }
  int world_size() const override { return links_.world_size; }
  void all_reduce_sum(std::span<float> values) override;
  void all_gather(std::span<const float> mine, std::span<float> gathered) override;
  void broadcast(std::span<std::byte> bytes, int root) override;

 private:
  // One collective frame from / to `rank` (rank 0 talks to every follower, a follower to rank 0).
  void receive_from(int rank, std::span<std::byte> out, Deadline deadline);
  void send_to(int rank, std::span<const std::byte> bytes, Deadline deadline);
  RankLinks& links_;
};

}  // namespace oscar
