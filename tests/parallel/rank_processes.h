#pragma once
// Ranks as forked processes for the tests of the TCP bootstrap and rank protocol: each runs a body
// and exits 0, or 1 with its Error's message on a pipe; the test collects every rank within a
// limit and kills any that outlives it (a hang fails the test instead of blocking it).
#include <sys/types.h>
#include <chrono>
#include <functional>
#include <string>

namespace oscar::testing {

struct RankProcess {
  pid_t pid = -1;
  int message_fd = -1;
};

struct RankOutcome {
  int exit_code = -1;   // -1: killed by a signal
  int signal = 0;       // the signal that ended it
  bool hung = false;    // still running at the limit (then killed)
  std::string message;  // its Error, if any
};

RankProcess start_rank(const std::function<void()>& body);
RankOutcome finish_rank(const RankProcess& process, std::chrono::steady_clock::time_point limit);

}  // namespace oscar::testing
