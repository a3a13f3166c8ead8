#pragma once
// What the whole-model tests compare runs with: a token stream from the testbed's validation text,
// the largest difference of two runs' logits relative to the reference's largest magnitude, the
// perplexity of a token stream under its logits, and how often two runs' argmax agree (where the
// reference is clear of a near-tie).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
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

// Perplexity of `tokens` under logits whose row i predicts token i + 1.
inline double perplexity(const std::vector<float>& logits, const std::vector<int32_t>& tokens,
                         int64_t vocab) {
  double nll = 0;
  for (size_t i = 0; i + 1 < tokens.size(); ++i) {
    const float* row = logits.data() + i * size_t(vocab);
    const float top = *std::max_element(row, row + vocab);
    double sum = 0;
    for (int64_t v = 0; v < vocab; ++v) sum += std::exp(double(row[v] - top));
    nll += std::log(sum) + top - row[tokens[i + 1]];
  }
  return std::exp(nll / double(tokens.size() - 1));
}

// Fraction of rows whose argmax agrees.
inline double argmax_agreement(const std::vector<float>& a, const std::vector<float>& b,
                               int64_t vocab) {
  const size_t rows = a.size() / size_t(vocab);
  size_t same = 0;
  for (size_t r = 0; r < rows; ++r) {
    const auto row_a = a.begin() + ptrdiff_t(r * size_t(vocab)),
               row_b = b.begin() + ptrdiff_t(r * size_t(vocab));
    same += (std::max_element(row_a, row_a + vocab) - row_a) ==
            (std::max_element(row_b, row_b + vocab) - row_b);
  }
  return double(same) / double(rows);
}

// Rows where `other`'s argmax differs from `reference`'s although the reference's top two logits
// are more than `margin` of its largest |logit| apart (a near-tie may flip either way).
inline int clear_argmax_mismatches(const std::vector<float>& reference,
                                   const std::vector<float>& other, int64_t vocab,
                                   float margin = 0.02f) {
  int mismatches = 0;
  for (size_t r = 0; r < reference.size() / size_t(vocab); ++r) {
    std::vector<float> row(reference.begin() + ptrdiff_t(r * size_t(vocab)),
                           reference.begin() + ptrdiff_t((r + 1) * size_t(vocab)));
    const auto o = other.begin() + ptrdiff_t(r * size_t(vocab));
    const auto reference_top = std::max_element(row.begin(), row.end()) - row.begin();
    const auto other_top = std::max_element(o, o + vocab) - o;
    float largest = 0;
    for (const float v : row) largest = std::max(largest, std::abs(v));
    std::partial_sort(row.begin(), row.begin() + 2, row.end(), std::greater<>());
    mismatches += row[0] - row[1] > margin * largest && reference_top != other_top;
  }
  return mismatches;
}

}  // namespace oscar::testing
