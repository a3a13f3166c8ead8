#pragma once
#include <string>

namespace oscar::testing {

// Under AddressSanitizer the CPU kernels run tens of times slower; the heaviest tests shrink
// their inputs (never their assertions) so the sanitizer suite stays quick.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

// The repository's root and the testbed model that ships in it.
std::string source_dir();
std::string testbed_model_dir();
std::string testbed_reference(const std::string& file_name);  // models/testbed/reference/<name>
// A fresh, empty directory for one test's files.
std::string make_temp_dir(const std::string& label);
// A fresh directory holding a copy of the testbed model's config, tokenizer and weights (no
// calibration text, no rotations), for tests that change or add files there.
std::string copy_testbed_model(const std::string& label);

}  // namespace oscar::testing
