#pragma once
#include <string>
#include <string_view>

namespace oscar {

// Decompresses an .xz stream held in memory; `source_name` names it in errors.
std::string decompress_xz(std::string_view compressed, const std::string& source_name);

}  // namespace oscar
