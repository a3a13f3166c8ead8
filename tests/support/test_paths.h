#pragma once
#include <string>

namespace oscar::testing {

// The repository's root and the testbed model that ships in it.
std::string source_dir();
std::string testbed_model_dir();
std::string testbed_reference(const std::string& file_name);  // models/testbed/reference/<name>
// A fresh, empty directory for one test's files.
std::string make_temp_dir(const std::string& label);

}  // namespace oscar::testing
