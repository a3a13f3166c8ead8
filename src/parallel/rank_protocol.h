#pragma once
// The rank protocol after the bootstrap: rank 0 owns the scheduler, the server and the sampler;
// every step it sends the followers its plan (parallel/rank_messages.h), all ranks run it (their
// collectives meet inside the step), and each follower answers step_done, or failure with its
// message. A rank that dies closes its connections: rank 0's wait for step_done, or a follower's
// wait for the next frame, ends in an Error naming the rank, and a rank that ends closes its own
// connections, so every rank ends. A follower waits for the next step without a deadline (a
// server may idle for hours); within a step every wait is bounded by the job's timeout.
#include <optional>
#include <string>

#include "parallel/rank_messages.h"
#include "parallel/tcp_bootstrap.h"

namespace oscar {

class StepLeader {
 public:
  explicit StepLeader(RankLinks& links);
  void send_step(const StepPlan& plan);
  // Every follower's step_done for `step_index`, or Error naming the rank that failed or left.
  void wait_step_done(int64_t step_index);
  void shutdown();
  // Best effort: tells the followers why rank 0 ends (they would see the connection close anyway).
  void report_failure(const std::string& message);

 private:
  RankLinks& links_;
};

// Asked while a rank waits for its GPU inside a step (the collectives of a dead peer never
// return): why a peer failed, or empty while all are alive. Rank 0 looks for a follower that
// closed its connection; a follower for rank 0 closing its connection or sending anything,
// which within a step can only be its failure report.
std::string peer_failure(const RankLinks& links);

class StepFollower {
 public:
  explicit StepFollower(RankLinks& links);
  // The next plan; nullopt when rank 0 shut the job down. Error when rank 0 failed or left.
  std::optional<StepPlan> next_step();
  void step_done(int64_t step_index);
  void report_failure(const std::string& message);

 private:
  RankLinks& links_;
};

}  // namespace oscar
