#pragma once
// The shipped testbed model's weights and tokenizer, loaded once per test program.
#include "model/model_weights.h"
#include "support/test_paths.h"
#include "tokenizer/tokenizer.h"

namespace oscar::testing {

inline const ModelWeights& testbed_weights() {
  static const ModelWeights weights = load_model(testbed_model_dir());
  return weights;
}

inline const Tokenizer& testbed_tokenizer() {
  static const Tokenizer tokenizer = Tokenizer::load(testbed_model_dir());
  return tokenizer;
}

}  // namespace oscar::testing
