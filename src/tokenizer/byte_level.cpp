#include "tokenizer/byte_level.h"

#include <map>

#include "tokenizer/utf8.h"
#include "util/error.h"

namespace oscar {

const std::array<char32_t, 256>& byte_to_unicode() {
  static const std::array<char32_t, 256> table = [] {
    std::array<char32_t, 256> t{};
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable =
          (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
      t[size_t(b)] = printable ? char32_t(b) : next++;
    }
    return t;
  }();
  return table;
}

std::optional<std::string> unicode_to_bytes(std::string_view entry) {
  static const std::map<char32_t, char> inverse = [] {
    std::map<char32_t, char> m;
    for (int b = 0; b < 256; ++b) m[byte_to_unicode()[size_t(b)]] = char(b);
    return m;
  }();
  std::u32string code_points;
  try {
    code_points = decode_utf8(entry);
  } catch (const Error&) {
    return std::nullopt;
  }
  std::string bytes;
  for (const char32_t c : code_points) {
    const auto it = inverse.find(c);
    if (it == inverse.end()) return std::nullopt;
    bytes.push_back(it->second);
  }
  return bytes;
}

}  // namespace oscar
