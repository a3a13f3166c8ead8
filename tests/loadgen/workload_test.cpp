// The serving benchmark's workload (plan_workload): exact prompt lengths cut from real text, and a
// warm-up request that leaves nothing in the prefix cache for the measured requests to reuse.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "loadgen/workload.h"
#include "support/test_paths.h"
#include "tokenizer/tokenizer.h"

namespace oscar {
namespace {

const Tokenizer& tokenizer() {
  static const Tokenizer t = Tokenizer::load(testing::testbed_model_dir());
  return t;
}

struct PlanCase {
  int64_t num_requests;
  double jitter;
  uint64_t seed;
};

TEST(Workload, TheWarmUpStartsNoMeasuredPromptAndIsAsLongAsTheLongest) {
  for (const PlanCase& c : {PlanCase{1, 0.0, 0}, PlanCase{8, 0.25, 1}, PlanCase{64, 0.0, 2}}) {
    SCOPED_TRACE(fmt::format("{} requests, jitter {}, seed {}", c.num_requests, c.jitter, c.seed));
    WorkloadOptions options;
    options.text_path = testing::testbed_model_dir() + "/valid.xz";
    options.num_requests = c.num_requests;
    options.input_tokens = 300;
    options.output_tokens = 16;
    options.length_jitter = c.jitter;
    options.seed = c.seed;
    const PlannedWorkload plan = plan_workload(options, tokenizer());
    ASSERT_EQ(int64_t(plan.requests.size()), c.num_requests);
    size_t longest = 0;
    std::set<int32_t> first_tokens;
    for (const PlannedRequest& request : plan.requests) {
      longest = std::max(longest, request.prompt.size());
      first_tokens.insert(request.prompt.front());
    }
    EXPECT_EQ(plan.warm_up.prompt.size(), longest);
    EXPECT_EQ(first_tokens.count(plan.warm_up.prompt.front()), 0u)
        << "token " << plan.warm_up.prompt.front();
    EXPECT_EQ(plan.warm_up.max_tokens, kWarmUpOutputTokens);
    if (c.num_requests != 8) continue;
    // The seed alone fixes the plan, warm-up included.
    const PlannedWorkload again = plan_workload(options, tokenizer());
    EXPECT_EQ(again.warm_up.prompt, plan.warm_up.prompt);
    for (size_t i = 0; i < plan.requests.size(); ++i)
      EXPECT_EQ(again.requests[i].prompt, plan.requests[i].prompt);
  }
}

TEST(Workload, PromptsHaveTheRequestedLengths) {
  WorkloadOptions options;
  options.text_path = testing::testbed_model_dir() + "/valid.xz";
  options.num_requests = 20;
  options.input_tokens = 100;
  options.output_tokens = 10;
  options.length_jitter = 0.2;
  const PlannedWorkload plan = plan_workload(options, tokenizer());
  for (const PlannedRequest& request : plan.requests) {
    EXPECT_GE(request.prompt.size(), 80u);
    EXPECT_LE(request.prompt.size(), 120u);
    EXPECT_GE(request.max_tokens, 8);
    EXPECT_LE(request.max_tokens, 12);
  }
}

}  // namespace
}  // namespace oscar
