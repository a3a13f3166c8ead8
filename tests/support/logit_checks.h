#pragma once
// What the whole-model tests compare runs with: a token stream from the testbed's validation text
// and the largest difference of two runs' logits relative to the reference's largest magnitude.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "format/documents.h"
#include "support/test_paths.h"

namespace oscar::testing {

// A real-looking token stream: bytes of validation text mapped into the vocabulary.
inline std::vector<int32_t> validation_byte_tokens(size_t count) {
  const auto documents = read_documents(testbed_model_dir() + "/valid.xz");
  std::vector<int32_t> tokens;
  for (const unsigned char c : documents[1]) {
    tokens.push_back(int32_t(c) + 200);
    if (tokens.size() == count) break;
  }
  return tokens;
}

// Infinity where `actual` holds a value that is not finite.
inline double max_relative_difference(const std::vector<float>& reference,
                                      const std::vector<float>& actual) {
  EXPECT_EQ(reference.size(), actual.size());
  double worst = 0, scale = 0;
  for (size_t i = 0; i < std::min(reference.size(), actual.size()); ++i) {
    if (!std::isfinite(actual[i])) return INFINITY;
    worst = std::max(worst, double(std::abs(reference[i] - actual[i])));
    scale = std::max(scale, double(std::abs(reference[i])));
  }
  return worst / scale;
}

}  // namespace oscar::testing
