#include "parallel/tcp_communicator.h"

#include <cstring>

#include "parallel/rank_messages.h"
#include "util/error.h"

namespace oscar {

void TcpCommunicator::receive_from(int rank, std::span<std::byte> out, Deadline deadline) {
  TcpSocket& socket = rank == 0 ? links_.leader : links_.followers[size_t(rank - 1)];
  const std::string peer = "collective: " + describe_rank(links_, rank);
  const Frame frame = receive_expected(socket, FrameType::collective, deadline, peer);
  require(frame.payload.size() == out.size(), "{}: sent {} bytes, {} expected (ranks out of step)",
          peer, frame.payload.size(), out.size());
  std::memcpy(out.data(), frame.payload.data(), out.size());
}

void TcpCommunicator::send_to(int rank, std::span<const std::byte> bytes, Deadline deadline) {
  TcpSocket& socket = rank == 0 ? links_.leader : links_.followers[size_t(rank - 1)];
  send_frame(socket, FrameType::collective, bytes, deadline,
             "collective: " + describe_rank(links_, rank));
}

void TcpCommunicator::all_reduce_sum(std::span<float> values) {
  if (world_size() == 1) return;
  const Deadline deadline = deadline_after(links_.timeout);
  if (rank() != 0) {
    send_to(0, std::as_bytes(values), deadline);
    receive_from(0, std::as_writable_bytes(values), deadline);
    return;
  }
  std::vector<float> other(values.size());
  for (int r = 1; r < world_size(); ++r) {
    receive_from(r, std::as_writable_bytes(std::span(other)), deadline);
    for (size_t i = 0; i < values.size(); ++i) values[i] += other[i];
  }
  for (int r = 1; r < world_size(); ++r) send_to(r, std::as_bytes(values), deadline);
}

void TcpCommunicator::all_gather(std::span<const float> mine, std::span<float> gathered) {
  require(gathered.size() == mine.size() * size_t(world_size()),
          "all_gather: {} values gathered from {} ranks of {} each", gathered.size(), world_size(),
          mine.size());
  std::memcpy(gathered.data() + size_t(rank()) * mine.size(), mine.data(),
              mine.size() * sizeof(float));
  if (world_size() == 1) return;
  const Deadline deadline = deadline_after(links_.timeout);
  if (rank() != 0) {
    send_to(0, std::as_bytes(mine), deadline);
    receive_from(0, std::as_writable_bytes(gathered), deadline);
    return;
  }
  for (int r = 1; r < world_size(); ++r) {
    receive_from(r, std::as_writable_bytes(gathered.subspan(size_t(r) * mine.size(), mine.size())),
                 deadline);
  }
  for (int r = 1; r < world_size(); ++r) send_to(r, std::as_bytes(gathered), deadline);
}

void TcpCommunicator::broadcast(std::span<std::byte> bytes, int root) {
  require(root >= 0 && root < world_size(), "broadcast from rank {} in a group of {}", root,
          world_size());
  if (world_size() == 1) return;
  const Deadline deadline = deadline_after(links_.timeout);
  if (rank() != 0) {
    if (rank() == root) send_to(0, bytes, deadline);
    receive_from(0, bytes, deadline);
    return;
  }
  if (root != 0) receive_from(root, bytes, deadline);
  for (int r = 1; r < world_size(); ++r) send_to(r, bytes, deadline);
}

}  // namespace oscar
