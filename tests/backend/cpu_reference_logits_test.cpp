// The CPU forward pass against transformers' float32 logits (models/testbed/reference).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

#include "backend/backend.h"
#include "model/model_weights.h"
#include "support/test_paths.h"
#include "util/file_io.h"

namespace oscar {
namespace {

struct ReferenceCase {
  std::vector<int32_t> prompt;
  std::vector<std::vector<float>> last_logits;
  std::vector<int32_t> greedy;
};

std::vector<ReferenceCase> load_cases() {
  const auto root =
      nlohmann::json::parse(read_file(testing::testbed_reference("logits-cases.json")));
  std::vector<ReferenceCase> cases;
  for (const auto& c : root["cases"]) {
    cases.push_back({c["prompt_ids"].get<std::vector<int32_t>>(),
                     c["last_logits"].get<std::vector<std::vector<float>>>(),
                     c["greedy_16"].get<std::vector<int32_t>>()});
  }
  return cases;
}

class CpuReferenceLogits : public ::testing::TestWithParam<KvDtype> {
 protected:
  static void SetUpTestSuite() {
    weights_ = new ModelWeights(load_model(testing::testbed_model_dir()));
  }
  static void TearDownTestSuite() { delete weights_; }
  static ModelWeights* weights_;
};
ModelWeights* CpuReferenceLogits::weights_ = nullptr;

TEST_P(CpuReferenceLogits, MatchesTransformersAndGreedyContinuation) {
  BackendOptions options;
  options.kv.dtype = GetParam();
  options.capacity = {256, 0};
  auto backend = make_backend(*weights_, options);
  for (const ReferenceCase& c : load_cases()) {
    KvPagePools pools{PagePool(options.capacity.full), PagePool(0)};
    SequencePages pages;
    // Prefill in chunks of 256 so that chunked prefill is exercised on the long cases.
    StepLogits logits;
    std::vector<std::vector<float>> last_rows;
    for (size_t start = 0; start < c.prompt.size(); start += 256) {
      const size_t count = std::min<size_t>(256, c.prompt.size() - start);
      ASSERT_TRUE(pages.reserve(int64_t(count), options.kv, pools));
      SequenceStep step{std::span(c.prompt).subspan(start, count), &pages, true};
      backend->forward({&step, 1}, logits);
      pages.commit(int64_t(count), options.kv, pools);
      for (int64_t r = 0; r < logits.rows; ++r) {
        last_rows.emplace_back(logits.row(r), logits.row(r) + logits.vocab_size);
      }
    }
    for (size_t i = 0; i < 3; ++i) {
      const auto& expected = c.last_logits[i];
      const auto& actual = last_rows[last_rows.size() - 3 + i];
      float max_abs = 0, max_diff = 0;
      for (size_t v = 0; v < expected.size(); ++v) {
        max_abs = std::max(max_abs, std::abs(expected[v]));
        max_diff = std::max(max_diff, std::abs(expected[v] - actual[v]));
      }
      EXPECT_LE(max_diff, 2e-3f * max_abs)
          << "prompt of " << c.prompt.size() << " tokens, row " << i;
    }
    // Greedy continuation through single-token decode steps.
    std::vector<int32_t> generated;
    std::vector<float> row = last_rows.back();
    for (int i = 0; i < 16; ++i) {
      const int32_t next = int32_t(std::max_element(row.begin(), row.end()) - row.begin());
      generated.push_back(next);
      ASSERT_TRUE(pages.reserve(1, options.kv, pools));
      SequenceStep step{std::span(&generated.back(), 1), &pages, false};
      backend->forward({&step, 1}, logits);
      pages.commit(1, options.kv, pools);
      row.assign(logits.row(0), logits.row(0) + logits.vocab_size);
    }
    EXPECT_EQ(generated, c.greedy) << "prompt of " << c.prompt.size() << " tokens";
  }
}

INSTANTIATE_TEST_SUITE_P(KvDtypes, CpuReferenceLogits,
                         ::testing::Values(KvDtype::f32, KvDtype::bf16), [](const auto& case_info) {
                           return std::string(to_string(case_info.param));
                         });

}  // namespace
}  // namespace oscar
