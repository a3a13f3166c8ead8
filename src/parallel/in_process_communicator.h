#pragma once
// Communicators for ranks that are threads of one process (tests of the sharded CPU backend): each
// collective publishes the rank's buffer, waits for every rank, reads the others' in rank order
// and waits again before any buffer is reused. A rank that fails calls abort(): the others' waits
// then throw Error instead of blocking, and so do waits longer than the timeout.
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "parallel/communicator.h"

namespace oscar {

class InProcessGroup {
 public:
  explicit InProcessGroup(int world_size,
                          std::chrono::milliseconds timeout = std::chrono::seconds(60));

  int world_size() const { return world_size_; }
  std::unique_ptr<Communicator> communicator(int rank);
  // Ends the group: every wait, now and later, throws Error with `reason`.
  void abort(const std::string& reason);

 private:
  friend class InProcessCommunicator;
  void wait_for_all(int rank);  // a barrier of every rank, or Error

  int world_size_;
  std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  std::condition_variable changed_;
  int arrived_ = 0;
  long generation_ = 0;
  std::string abort_reason_;
  std::vector<const void*> buffers_;  // per rank: what it published for the current collective
};

}  // namespace oscar
