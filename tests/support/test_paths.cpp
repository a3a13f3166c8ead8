#include "support/test_paths.h"

#include <stdlib.h>

#include <filesystem>
#include <stdexcept>
#include <vector>

namespace oscar::testing {

std::string source_dir() {
  return OSCAR_SOURCE_DIR;
}
std::string testbed_model_dir() {
  return source_dir() + "/models/testbed";
}
std::string testbed_reference(const std::string& file_name) {
  return testbed_model_dir() + "/reference/" + file_name;
}

std::string make_temp_dir(const std::string& label) {
  std::string pattern = std::string(OSCAR_BINARY_DIR) + "/test-tmp-" + label + "-XXXXXX";
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (::mkdtemp(buffer.data()) == nullptr)
    throw std::runtime_error("mkdtemp failed for " + pattern);
  return std::string(buffer.data());
}

std::string copy_testbed_model(const std::string& label) {
  const std::string dir = make_temp_dir(label);
  for (const char* name : {"config.json", "generation_config.json", "tokenizer.json",
                           "tokenizer_config.json", "model.safetensors"}) {
    std::filesystem::copy_file(testbed_model_dir() + "/" + name, dir + "/" + name);
  }
  return dir;
}

}  // namespace oscar::testing
