#pragma once
// The collectives tensor parallelism needs, between the ranks of one group. The CPU backend calls
// them at the sharding points (parallel/shard_plan.h); the CUDA backend will implement the same
// interface with NCCL. Every rank calls the same collectives in the same order with the same
// sizes; a rank that fails or leaves makes the others' calls throw Error, never wait forever.
#include <cstddef>
#include <span>

namespace oscar {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // values = the sum over ranks of every rank's values, the same bits on every rank.
  virtual void all_reduce_sum(std::span<float> values) = 0;
  // gathered = the ranks' `mine` one after another in rank order (world_size * mine.size()).
  virtual void all_gather(std::span<const float> mine, std::span<float> gathered) = 0;
  // bytes = rank `root`'s bytes on every rank.
  virtual void broadcast(std::span<std::byte> bytes, int root) = 0;
};

}  // namespace oscar
