#pragma once
// GPT-2's byte-to-unicode map: byte-level BPE vocabularies spell every byte as a printable code
// point (printable Latin-1 bytes as themselves, the rest as U+0100 upwards), so "Ġ" is a space.
#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace oscar {

const std::array<char32_t, 256>& byte_to_unicode();
// The raw bytes a vocabulary entry spells, or nullopt if it holds a code point outside the map.
std::optional<std::string> unicode_to_bytes(std::string_view vocabulary_entry);

}  // namespace oscar
