#include "util/hash.h"

#include <fmt/format.h>

namespace oscar {

std::string to_hex(uint64_t value) {
  return fmt::format("{:016x}", value);
}

}  // namespace oscar
