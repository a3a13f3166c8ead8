#pragma once
// parallel_for over [begin, end) on the OpenMP thread pool. An exception thrown by the body is
// carried out of the parallel region and rethrown on the calling thread (an exception escaping
// an OpenMP region would terminate the program).
#include <cstdint>
#include <exception>
#include <mutex>

namespace oscar {

template <typename Body>
void parallel_for(int64_t begin, int64_t end, Body&& body, bool dynamic_schedule = false) {
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto run = [&](int64_t i) {
    try {
      body(i);
    } catch (...) {
      const std::lock_guard lock(failure_mutex);
      if (!failure) failure = std::current_exception();
    }
  };
  if (dynamic_schedule) {
#pragma omp parallel for schedule(dynamic)
    for (int64_t i = begin; i < end; ++i) run(i);
  } else {
#pragma omp parallel for schedule(static)
    for (int64_t i = begin; i < end; ++i) run(i);
  }
  if (failure) std::rethrow_exception(failure);
}

}  // namespace oscar
