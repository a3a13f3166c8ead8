#pragma once
// Errors in oscar: library code throws oscar::Error with a message that names what is at fault
// (file, tensor, field, request) and what was expected versus found. Only the command-line layer
// and the server turn an Error into a message and an exit code or HTTP status.
#include <exception>
#include <stdexcept>
#include <string>
#include <utility>

#include <fmt/format.h>

namespace oscar {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

template <typename... Args>
void require(bool condition, fmt::format_string<Args...> format, Args&&... args) {
  if (!condition) throw Error(fmt::format(format, std::forward<Args>(args)...));
}

// The message of a caught exception, or `otherwise` when it is not a std::exception.
inline std::string exception_message(const std::exception_ptr& error, const char* otherwise) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return otherwise;
  }
}

}  // namespace oscar
