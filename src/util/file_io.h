#pragma once
// Whole-file reads and crash-safe writes (write to a temporary file, then rename), so that an
// interrupted run never leaves a half-written rotations file or result behind.
#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace oscar {

std::string read_file(const std::string& path);
void write_file_atomically(const std::string& path, std::span<const std::byte> bytes);
void write_file_atomically(const std::string& path, std::string_view text);
bool file_exists(const std::string& path);

}  // namespace oscar
