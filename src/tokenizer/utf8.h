#pragma once
// UTF-8 decoding and encoding, strict (no overlongs, surrogates or code points past U+10FFFF).
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace oscar {

// Length of the valid UTF-8 sequence starting at text[i], or 0 when the bytes there are not one
// (truncated, overlong, surrogate, out of range or a stray continuation byte).
size_t utf8_sequence_length(std::string_view text, size_t i);

// Decodes valid UTF-8; throws Error("invalid UTF-8 at byte N") otherwise.
std::u32string decode_utf8(std::string_view text);
void append_utf8(char32_t code_point, std::string& out);
std::string encode_utf8(std::u32string_view text);

}  // namespace oscar
