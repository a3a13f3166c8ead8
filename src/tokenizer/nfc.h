#pragma once
// Unicode Normalization Form C (UAX #15): canonical decomposition, canonical ordering, canonical
// composition. Qwen2/Qwen3 tokenizers normalise their input to NFC before splitting it.
#include <string>

namespace oscar {

std::u32string to_nfc(const std::u32string& text);

}  // namespace oscar
