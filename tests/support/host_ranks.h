#pragma once
// Tensor-parallel ranks as threads of a test, joined by an in-process communicator: runs
// rank(communicator, r) on `world_size` threads; a rank that throws aborts the group, so that the
// others' collectives end in an error instead of waiting, and its message is returned. Header-only:
// only the rooms whose tests link the parallel library include it.
#include <fmt/format.h>

#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "parallel/in_process_communicator.h"

namespace oscar::testing {

// Each rank's error message, "" where it finished.
inline std::vector<std::string> run_host_ranks(
    int world_size, const std::function<void(Communicator&, int)>& rank) {
  InProcessGroup group(world_size);
  std::vector<std::string> errors(static_cast<size_t>(world_size));
  std::vector<std::thread> threads;
  for (int r = 0; r < world_size; ++r) {
    threads.emplace_back([&, r] {
      try {
        const auto communicator = group.communicator(r);
        rank(*communicator, r);
      } catch (const std::exception& e) {
        errors[size_t(r)] = e.what();
        group.abort(fmt::format("rank {} failed", r));
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  return errors;
}

}  // namespace oscar::testing
