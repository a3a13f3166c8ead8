#pragma once
// The shipped testbed model's weights and tokenizer, loaded once per test program.
#include <cstdint>
#include <vector>

#include "format/documents.h"
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

// The first `count` tokens of the validation text from document `document` on: real text, as the
// product sees it (on byte soup the model's distributions are flat and near-ties decide the
// greedy path).
inline std::vector<int32_t> testbed_text_tokens(size_t count, size_t document = 1) {
  static const auto documents = read_documents(testbed_model_dir() + "/valid.xz");
  std::vector<int32_t> tokens;
  for (size_t d = document; tokens.size() < count; ++d) {
    const auto more = testbed_tokenizer().encode(documents.at(d), false);
    tokens.insert(tokens.end(), more.begin(), more.end());
  }
  tokens.resize(count);
  return tokens;
}

}  // namespace oscar::testing
