#pragma once
// FNV-1a, 64 bit: a stable fingerprint (not a security hash) used to tie a rotations file to the
// model config it was calibrated on.
#include <cstdint>
#include <string>
#include <string_view>

namespace oscar {

inline constexpr uint64_t kFnv1a64OffsetBasis = 0xcbf29ce484222325ull;

inline uint64_t fnv1a64(std::string_view bytes, uint64_t hash = kFnv1a64OffsetBasis) {
  for (const char c : bytes) {
    hash ^= uint8_t(c);
    hash *= 0x100000001b3ull;
  }
  return hash;
}

std::string to_hex(uint64_t value);

}  // namespace oscar
