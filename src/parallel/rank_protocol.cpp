#include "parallel/rank_protocol.h"

#include <poll.h>

#include <vector>

#include "util/error.h"

namespace oscar {
namespace {

// A follower idles between steps with no deadline of its own: rank 0's death still ends the wait.
constexpr auto kIdleWait = std::chrono::hours(24 * 365);

std::span<const std::byte> bytes_of(const std::string& text) {
  return std::as_bytes(std::span(text.data(), text.size()));
}

}  // namespace

std::string peer_failure(const RankLinks& links) {
  std::vector<pollfd> watched;
  const short closed = POLLRDHUP | POLLHUP | POLLERR | POLLNVAL;
  if (links.rank == 0) {
    for (const TcpSocket& follower : links.followers) {
      watched.push_back({follower.fd(), POLLRDHUP, 0});
    }
  } else {
    watched.push_back({links.leader.fd(), short(POLLIN | POLLRDHUP), 0});
  }
  if (::poll(watched.data(), watched.size(), 0) <= 0) return {};
  for (size_t i = 0; i < watched.size(); ++i) {
    const short events = watched[i].revents;
    const int peer = links.rank == 0 ? int(i) + 1 : 0;
    if ((events & closed) != 0) {
      return fmt::format("{} left the job (its connection closed)", describe_rank(links, peer));
    }
    if ((events & POLLIN) != 0) {  // only a follower watches for input
      return fmt::format("{} ended the step (it reported a failure)", describe_rank(links, peer));
    }
  }
  return {};
}

StepLeader::StepLeader(RankLinks& links) : links_(links) {
  require(links.rank == 0, "the step leader is rank 0, not rank {}", links.rank);
}

void StepLeader::send_step(const StepPlan& plan) {
  const std::vector<std::byte> payload = encode_step_plan(plan);
  const Deadline deadline = deadline_after(links_.timeout);
  for (int r = 1; r < links_.world_size; ++r) {
    send_frame(links_.followers[size_t(r - 1)], FrameType::step, payload, deadline,
               describe_rank(links_, r));
  }
}

void StepLeader::wait_step_done(int64_t step_index) {
  const Deadline deadline = deadline_after(links_.timeout);
  for (int r = 1; r < links_.world_size; ++r) {
    const std::string peer = fmt::format("step {}: {}", step_index, describe_rank(links_, r));
    const Frame done =
        receive_expected(links_.followers[size_t(r - 1)], FrameType::step_done, deadline, peer);
    ByteReader in(done.payload, peer + " step_done");
    const auto index = in.get<int64_t>();
    require(index == step_index, "{}: finished step {} instead", peer, index);
  }
}

void StepLeader::shutdown() {
  const Deadline deadline = deadline_after(links_.timeout);
  for (int r = 1; r < links_.world_size; ++r) {
    send_frame(links_.followers[size_t(r - 1)], FrameType::shutdown, {}, deadline,
               describe_rank(links_, r));
  }
}

void StepLeader::report_failure(const std::string& message) {
  const Deadline deadline = deadline_after(std::chrono::milliseconds(200));
  for (int r = 1; r < links_.world_size; ++r) {
    try {
      send_frame(links_.followers[size_t(r - 1)], FrameType::failure, bytes_of(message), deadline,
                 describe_rank(links_, r));
    } catch (const Error&) {
      // That rank is gone already; the others still hear why.
    }
  }
}

StepFollower::StepFollower(RankLinks& links) : links_(links) {
  require(links.rank > 0, "a step follower is a rank other than 0");
}

std::optional<StepPlan> StepFollower::next_step() {
  const std::string peer =
      fmt::format("rank {} waiting for its next step: {}", links_.rank, describe_rank(links_, 0));
  const Frame frame = receive_frame(links_.leader, deadline_after(kIdleWait), peer);
  if (frame.type == FrameType::shutdown) return std::nullopt;
  if (frame.type == FrameType::failure) {
    fail("{} failed: {}", describe_rank(links_, 0),
         std::string(reinterpret_cast<const char*>(frame.payload.data()), frame.payload.size()));
  }
  require(frame.type == FrameType::step, "{}: expected a step, got a {} frame", peer,
          to_string(frame.type));
  return decode_step_plan(frame.payload);
}

void StepFollower::step_done(int64_t step_index) {
  ByteWriter out;
  out.put(step_index);
  send_frame(links_.leader, FrameType::step_done, out.bytes, deadline_after(links_.timeout),
             describe_rank(links_, 0));
}

void StepFollower::report_failure(const std::string& message) {
  try {
    send_frame(links_.leader, FrameType::failure, bytes_of(message),
               deadline_after(std::chrono::milliseconds(200)), describe_rank(links_, 0));
  } catch (const Error&) {
    // Rank 0 is gone already.
  }
}

}  // namespace oscar
