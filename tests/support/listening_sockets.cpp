#include "support/listening_sockets.h"

#include <arpa/inet.h>

#include <array>
#include <cstdint>
#include <fstream>
#include <sstream>

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

}  // namespace oscar::testing
