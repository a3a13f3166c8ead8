#pragma once
// The supported families, one file each (family_<name>.cpp); model_family.cpp lists them.
#include "model/model_family.h"

namespace oscar {

const ModelFamily& qwen3_family();
const ModelFamily& llama_family();
const ModelFamily& mistral_family();

}  // namespace oscar
