#include "model/model_family.h"

#include <array>

#include "model/model_families.h"
#include "util/error.h"

namespace oscar {

std::span<const ModelFamily* const> model_families() {
  static const std::array<const ModelFamily*, 3> families = {&qwen3_family(), &llama_family(),
                                                             &mistral_family()};
  return families;
}

const ModelFamily& find_model_family(std::string_view architecture_name) {
  std::string supported;
  for (const ModelFamily* family : model_families()) {
    if (family->architecture_name == architecture_name) return *family;
    supported += (supported.empty() ? "" : ", ") + std::string(family->architecture_name);
  }
  fail("unsupported architecture {} (supported: {})", architecture_name, supported);
}

}  // namespace oscar
