#include "support/test_paths.h"

#include <stdlib.h>

#include <stdexcept>
#include <vector>

namespace oscar::testing {

std::string source_dir() { return OSCAR_SOURCE_DIR; }
std::string testbed_model_dir() { return source_dir() + "/models/testbed"; }
std::string testbed_reference(const std::string& file_name) {
  return testbed_model_dir() + "/reference/" + file_name;
}

std::string make_temp_dir(const std::string& label) {
  std::string pattern = std::string(OSCAR_BINARY_DIR) + "/test-tmp-" + label + "-XXXXXX";
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (::mkdtemp(buffer.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + pattern);
  return std::string(buffer.data());
}

}  // namespace oscar::testing
