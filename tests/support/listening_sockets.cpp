#include "support/listening_sockets.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace oscar::testing {
namespace {

// /proc/net/tcp* print an address as the hex of its 32-bit words in host (little-endian) order.
std::string address_text(const std::string& hex) {
  std::array<uint8_t, 16> bytes{};
  const size_t num_bytes = hex.size() / 2;
  for (size_t word = 0; word < num_bytes / 4; ++word) {
    const auto value = uint32_t(std::stoul(hex.substr(word * 8, 8), nullptr, 16));
    for (size_t b = 0; b < 4; ++b) bytes[word * 4 + b] = uint8_t(value >> (8 * b));
  }
  std::array<char, INET6_ADDRSTRLEN> text{};
  inet_ntop(num_bytes == 4 ? AF_INET : AF_INET6, bytes.data(), text.data(), text.size());
  return text.data();
}

}  // namespace

std::vector<std::string> listening_addresses(int port) {
  constexpr const char* kListen = "0A";  // TCP_LISTEN in the "st" column
  std::vector<std::string> addresses;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state;
      fields >> slot >> local >> remote >> state;
      const size_t colon = local.find(':');
      if (state != kListen || colon == std::string::npos) continue;
      if (std::stoi(local.substr(colon + 1), nullptr, 16) != port) continue;
      addresses.push_back(address_text(local.substr(0, colon)));
    }
  }
  return addresses;
}

int free_local_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("free_local_port: socket failed");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;  // the system picks
  socklen_t length = sizeof(address);
  const bool bound = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
                     ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  ::close(fd);
  if (!bound) throw std::runtime_error("free_local_port: no port on 127.0.0.1");
  return ntohs(address.sin_port);
}

}  // namespace oscar::testing
