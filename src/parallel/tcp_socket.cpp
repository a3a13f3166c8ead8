#include "parallel/tcp_socket.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <thread>

#include "util/error.h"

namespace oscar {
namespace {

int remaining_ms(Deadline deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return int(std::max<int64_t>(0, left.count()));
}

// Waits until `fd` is ready for `events`; false at the deadline.
bool wait_ready(int fd, short events, Deadline deadline) {
  while (true) {
    pollfd entry{fd, events, 0};
    const int ready = ::poll(&entry, 1, remaining_ms(deadline));
    if (ready > 0) return true;
    if (ready == 0) return false;
    if (errno != EINTR) fail("poll: {}", std::strerror(errno));
  }
}

struct AddressList {
  addrinfo* first = nullptr;
  ~AddressList() {
    if (first != nullptr) ::freeaddrinfo(first);
  }
};

void resolve(const HostPort& address, bool passive, AddressList& out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  const std::string port = std::to_string(address.port);
  const int status = ::getaddrinfo(address.host.c_str(), port.c_str(), &hints, &out.first);
  require(status == 0, "cannot resolve {}:{}: {}", address.host, address.port,
          ::gai_strerror(status));
}

void set_no_delay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace

Deadline deadline_after(std::chrono::milliseconds timeout) {
  return std::chrono::steady_clock::now() + timeout;
}

HostPort parse_host_port(const std::string& text) {
  const size_t colon = text.rfind(':');
  require(colon != std::string::npos && colon > 0 && colon + 1 < text.size(),
          "--dist-init-addr '{}': expected host:port", text);
  HostPort address;
  address.host = text.substr(0, colon);
  if (address.host.size() > 2 && address.host.front() == '[' && address.host.back() == ']') {
    address.host = address.host.substr(1, address.host.size() - 2);
  }
  const char* first = text.data() + colon + 1;
  const char* last = text.data() + text.size();
  const auto [end, error] = std::from_chars(first, last, address.port);
  require(error == std::errc() && end == last && address.port > 0 && address.port < 65536,
          "--dist-init-addr '{}': the port must be a number in 1..65535", text);
  return address;
}

TcpSocket& TcpSocket::operator=(TcpSocket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

TcpSocket::~TcpSocket() {
  close();
}

void TcpSocket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void TcpSocket::send_all(std::span<const std::byte> bytes, Deadline deadline,
                         const std::string& peer) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    require(wait_ready(fd_, POLLOUT, deadline), "{}: could not send within the timeout", peer);
    const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    require(n > 0, "{}: the connection is gone ({})", peer,
            n < 0 ? std::strerror(errno) : "closed");
    sent += size_t(n);
  }
}

void TcpSocket::receive_all(std::span<std::byte> bytes, Deadline deadline,
                            const std::string& peer) {
  size_t received = 0;
  while (received < bytes.size()) {
    require(wait_ready(fd_, POLLIN, deadline), "{}: nothing arrived within the timeout", peer);
    const ssize_t n = ::recv(fd_, bytes.data() + received, bytes.size() - received, 0);
    if (n < 0 && errno == EINTR) continue;
    require(n >= 0, "{}: the connection failed ({})", peer, std::strerror(errno));
    require(n > 0, "{}: the peer closed the connection (it ended or was killed)", peer);
    received += size_t(n);
  }
}

TcpSocket listen_on(const HostPort& address, int backlog) {
  AddressList list;
  resolve(address, true, list);
  std::string last_error = "no address";
  for (addrinfo* a = list.first; a != nullptr; a = a->ai_next) {
    TcpSocket socket(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (!socket.is_open()) continue;
    const int one = 1;
    ::setsockopt(socket.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(socket.fd(), a->ai_addr, a->ai_addrlen) == 0 &&
        ::listen(socket.fd(), backlog) == 0) {
      return socket;
    }
    last_error = std::strerror(errno);
  }
  fail("cannot listen on {}:{}: {}", address.host, address.port, last_error);
}

TcpSocket accept_before(TcpSocket& listener, Deadline deadline, const std::string& what) {
  while (true) {
    require(wait_ready(listener.fd(), POLLIN, deadline), "{}: timed out", what);
    const int fd = ::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) {
      set_no_delay(fd);
      return TcpSocket(fd);
    }
    require(errno == EINTR || errno == ECONNABORTED || errno == EAGAIN, "{}: accept: {}", what,
            std::strerror(errno));
  }
}

TcpSocket connect_before(const HostPort& address, Deadline deadline, const std::string& what) {
  std::string last_error = "no address";
  while (true) {
    AddressList list;
    resolve(address, false, list);
    for (addrinfo* a = list.first; a != nullptr; a = a->ai_next) {
      // Non-blocking, so an unanswered connect waits no longer than the deadline.
      TcpSocket socket(
          ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
      if (!socket.is_open()) continue;
      int status = ::connect(socket.fd(), a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
      if (status == EINPROGRESS) {
        status = ETIMEDOUT;
        if (wait_ready(socket.fd(), POLLOUT, deadline)) {
          socklen_t length = sizeof(status);
          ::getsockopt(socket.fd(), SOL_SOCKET, SO_ERROR, &status, &length);
        }
      }
      if (status == 0) {
        ::fcntl(socket.fd(), F_SETFL, ::fcntl(socket.fd(), F_GETFL) & ~O_NONBLOCK);
        set_no_delay(socket.fd());
        return socket;
      }
      last_error = std::strerror(status);
    }
    require(remaining_ms(deadline) > 0, "{}: could not connect to {}:{} within the timeout ({})",
            what, address.host, address.port, last_error);
    // Nothing listens yet (rank 0 may start later): try again shortly.
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(50, remaining_ms(deadline))));
  }
}

int bound_port(const TcpSocket& socket) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  require(::getsockname(socket.fd(), reinterpret_cast<sockaddr*>(&address), &length) == 0,
          "getsockname: {}", std::strerror(errno));
  if (address.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<sockaddr_in6*>(&address)->sin6_port);
  }
  return ntohs(reinterpret_cast<sockaddr_in*>(&address)->sin_port);
}

}  // namespace oscar
