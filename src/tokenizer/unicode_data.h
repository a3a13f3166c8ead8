#pragma once
// Unicode tables (generated: tools/generate_unicode_data.py -> unicode_data.cpp) and the queries
// the pre-tokenizer and NFC normalisation make of them.
#include <cstddef>
#include <cstdint>

namespace oscar {
namespace unicode_data {

struct CodePointRange {
  char32_t first, last;
};
struct CombiningClassRange {
  char32_t first, last;
  uint8_t combining_class;
};
struct Decomposition {
  char32_t code_point, first, second;  // second = 0 for a singleton
};
struct Composition {
  char32_t first, second, composite;  // sorted by (first, second)
};

extern const CodePointRange kLetters[];
extern const size_t kLetters_count;
extern const CodePointRange kNumbers[];
extern const size_t kNumbers_count;
extern const CombiningClassRange kCombiningClasses[];
extern const size_t kCombiningClasses_count;
extern const Decomposition kDecompositions[];
extern const size_t kDecompositions_count;
extern const Composition kCompositions[];
extern const size_t kCompositions_count;

}  // namespace unicode_data

bool is_letter(char32_t c);      // \p{L}
bool is_number(char32_t c);      // \p{N}
bool is_whitespace(char32_t c);  // \s: the White_Space property
uint8_t combining_class(char32_t c);
const unicode_data::Decomposition* canonical_decomposition(char32_t c);  // nullptr if none
char32_t compose_pair(char32_t first, char32_t second);  // 0 if the pair does not compose

}  // namespace oscar
