#include "tokenizer/nfc.h"

#include <algorithm>

#include "tokenizer/unicode_data.h"

namespace oscar {
namespace {

// Hangul syllables decompose and compose algorithmically (Unicode 3.12).
constexpr char32_t kSBase = 0xac00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11a7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount,
                   kSCount = kLCount * kNCount;

void decompose(char32_t c, std::u32string& out) {
  if (c >= kSBase && c < kSBase + kSCount) {
    const char32_t index = c - kSBase;
    out.push_back(kLBase + index / kNCount);
    out.push_back(kVBase + (index % kNCount) / kTCount);
    if (index % kTCount != 0) out.push_back(kTBase + index % kTCount);
    return;
  }
  const auto* entry = canonical_decomposition(c);
  if (entry == nullptr) {
    out.push_back(c);
    return;
  }
  decompose(entry->first, out);
  if (entry->second != 0) decompose(entry->second, out);
}

char32_t compose(char32_t first, char32_t second) {
  if (first >= kLBase && first < kLBase + kLCount && second >= kVBase &&
      second < kVBase + kVCount) {
    return kSBase + ((first - kLBase) * kVCount + (second - kVBase)) * kTCount;
  }
  if (first >= kSBase && first < kSBase + kSCount && (first - kSBase) % kTCount == 0 &&
      second > kTBase && second < kTBase + kTCount) {
    return first + (second - kTBase);
  }
  return compose_pair(first, second);
}

}  // namespace

std::u32string to_nfc(const std::u32string& text) {
  // Fast path: text below U+0300 holds no decomposable or combining characters.
  if (std::all_of(text.begin(), text.end(), [](char32_t c) { return c < 0x300; })) return text;
  std::u32string decomposed;
  decomposed.reserve(text.size());
  for (const char32_t c : text) decompose(c, decomposed);
  // Canonical ordering: a stable sort of every run of non-starters by combining class.
  for (size_t i = 0; i < decomposed.size();) {
    if (combining_class(decomposed[i]) == 0) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < decomposed.size() && combining_class(decomposed[end]) != 0) ++end;
    std::stable_sort(
        decomposed.begin() + long(i), decomposed.begin() + long(end),
        [](char32_t a, char32_t b) { return combining_class(a) < combining_class(b); });
    i = end;
  }
  // Canonical composition.
  std::u32string out;
  out.reserve(decomposed.size());
  long starter = -1;
  uint8_t last_class = 0;
  for (const char32_t c : decomposed) {
    const uint8_t c_class = combining_class(c);
    if (starter >= 0) {
      const bool blocked =
          out.size() > size_t(starter) + 1 && (last_class == 0 || last_class >= c_class);
      if (!blocked) {
        const char32_t composite = compose(out[size_t(starter)], c);
        if (composite != 0) {
          out[size_t(starter)] = composite;
          continue;
        }
      }
    }
    if (c_class == 0) {
      starter = long(out.size());
      last_class = 0;
    } else {
      last_class = c_class;
    }
    out.push_back(c);
  }
  return out;
}

}  // namespace oscar
