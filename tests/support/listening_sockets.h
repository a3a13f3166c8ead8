#pragma once
#include <string>
#include <vector>

namespace oscar::testing {

// The local addresses ("127.0.0.1", "0.0.0.0", "::1", ...) of this machine's TCP sockets that
// listen on `port`, read from /proc/net/tcp and /proc/net/tcp6.
std::vector<std::string> listening_addresses(int port);

// A TCP port on 127.0.0.1 that nothing listens on now (the system's pick of a free one; a process
// the test starts then listens there).
int free_local_port();

}  // namespace oscar::testing
