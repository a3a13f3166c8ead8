#include <algorithm>

#include "tokenizer/unicode_data.h"

namespace oscar {
namespace {

bool in_ranges(const unicode_data::CodePointRange* ranges, size_t count, char32_t c) {
  const auto* end = ranges + count;
  const auto* it = std::upper_bound(
      ranges, end, c, [](char32_t value, const auto& range) { return value < range.first; });
  return it != ranges && c <= (it - 1)->last;
}

}  // namespace

bool is_letter(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  return in_ranges(unicode_data::kLetters, unicode_data::kLetters_count, c);
}

bool is_number(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  return in_ranges(unicode_data::kNumbers, unicode_data::kNumbers_count, c);
}

bool is_whitespace(char32_t c) {
  // The White_Space property (stable since Unicode 6.0).
  return (c >= 0x09 && c <= 0x0d) || c == 0x20 || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f ||
         c == 0x3000;
}

uint8_t combining_class(char32_t c) {
  if (c < 0x300) return 0;
  const auto* begin = unicode_data::kCombiningClasses;
  const auto* end = begin + unicode_data::kCombiningClasses_count;
  const auto* it = std::upper_bound(
      begin, end, c, [](char32_t value, const auto& range) { return value < range.first; });
  return (it != begin && c <= (it - 1)->last) ? (it - 1)->combining_class : 0;
}

const unicode_data::Decomposition* canonical_decomposition(char32_t c) {
  const auto* begin = unicode_data::kDecompositions;
  const auto* end = begin + unicode_data::kDecompositions_count;
  const auto* it = std::lower_bound(
      begin, end, c, [](const auto& entry, char32_t value) { return entry.code_point < value; });
  return (it != end && it->code_point == c) ? it : nullptr;
}

char32_t compose_pair(char32_t first, char32_t second) {
  const auto* begin = unicode_data::kCompositions;
  const auto* end = begin + unicode_data::kCompositions_count;
  const auto* it = std::lower_bound(begin, end, std::pair(first, second),
                                    [](const auto& entry, const auto& key) {
                                      return std::pair(entry.first, entry.second) < key;
                                    });
  return (it != end && it->first == first && it->second == second) ? it->composite : 0;
}

}  // namespace oscar
