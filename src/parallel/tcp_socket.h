#pragma once
// Plain POSIX TCP for the tensor-parallel bootstrap and rank protocol: blocking sockets whose
// every wait is bounded by a deadline (poll), so a silent or dead peer is an Error that names
// what was awaited, never a hang. A peer that dies closes its end, which reads as end of stream.
#include <chrono>
#include <cstddef>
#include <span>
#include <string>

namespace oscar {

using Deadline = std::chrono::steady_clock::time_point;
Deadline deadline_after(std::chrono::milliseconds timeout);

struct HostPort {
  std::string host;
  int port = 0;
};
// "host:port" or "[v6 address]:port" (--dist-init-addr); Error naming the text otherwise.
HostPort parse_host_port(const std::string& text);

class TcpSocket {
 public:
  TcpSocket() = default;
  explicit TcpSocket(int fd) : fd_(fd) {}
  TcpSocket(TcpSocket&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  TcpSocket& operator=(TcpSocket&& other) noexcept;
  TcpSocket(const TcpSocket&) = delete;
  TcpSocket& operator=(const TcpSocket&) = delete;
  ~TcpSocket();

  bool is_open() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  void close();

  // All of `bytes`, or Error "<peer>: ..." when the peer closed or the deadline passed.
  void send_all(std::span<const std::byte> bytes, Deadline deadline, const std::string& peer);
  void receive_all(std::span<std::byte> bytes, Deadline deadline, const std::string& peer);

 private:
  int fd_ = -1;
};

// A socket listening on `address` (SO_REUSEADDR).
TcpSocket listen_on(const HostPort& address, int backlog);
// The next connection to `listener`, or Error naming `what` at the deadline.
TcpSocket accept_before(TcpSocket& listener, Deadline deadline, const std::string& what);
// Connects to `address`, retrying while nothing listens there yet, until the deadline.
TcpSocket connect_before(const HostPort& address, Deadline deadline, const std::string& what);
// The port a listening socket is bound to (listen_on port 0 picks a free one).
int bound_port(const TcpSocket& socket);

}  // namespace oscar
