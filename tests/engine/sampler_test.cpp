// Sampling rules and stop strings.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "engine/sampler.h"
#include "engine/stop_strings.h"
#include "util/error.h"

namespace oscar {
namespace {

const std::vector<float> kLogits = {1.0f, 3.0f, 2.5f, -1.0f, 0.5f, 2.9f};

TEST(Sampler, GreedyPicksTheArgmaxAndReportsItsLogprob) {
  Sampler sampler({.temperature = 0.0f});
  const SampledToken t = sampler.sample(kLogits, {});
  EXPECT_EQ(t.token, 1);
  double z = 0;
  for (const float v : kLogits) z += std::exp(v);
  EXPECT_NEAR(t.logprob, 3.0 - std::log(z), 1e-5);
}

TEST(Sampler, SeedMakesDrawsRepeatable) {
  Sampler a({.temperature = 1.0f, .seed = 5}), b({.temperature = 1.0f, .seed = 5});
  for (int i = 0; i < 50; ++i) EXPECT_EQ(a.sample(kLogits, {}).token, b.sample(kLogits, {}).token);
}

std::map<int32_t, int> histogram(SamplingParams params, int draws) {
  params.seed = 11;
  Sampler sampler(params);
  std::map<int32_t, int> counts;
  for (int i = 0; i < draws; ++i) ++counts[sampler.sample(kLogits, {}).token];
  return counts;
}

TEST(Sampler, TopKTopPAndMinPTruncate) {
  auto top_k = histogram({.temperature = 1.0f, .top_k = 2}, 2000);
  EXPECT_EQ(top_k.size(), 2u);
  EXPECT_TRUE(top_k.count(1) && top_k.count(5));
  // Probabilities: 1 -> .34, 5 -> .31, 2 -> .21 ...: top_p 0.6 keeps two tokens.
  auto top_p = histogram({.temperature = 1.0f, .top_p = 0.6f}, 2000);
  EXPECT_EQ(top_p.size(), 2u);
  // min_p 0.7: tokens at least 0.7 times as likely as the best: 1 (1.0), 5 (0.90); 2 is 0.61.
  auto min_p = histogram({.temperature = 1.0f, .min_p = 0.7f}, 2000);
  EXPECT_EQ(min_p.size(), 2u);
  // The full distribution at temperature 1: token 1 about 34% of draws.
  auto full = histogram({.temperature = 1.0f}, 20000);
  EXPECT_NEAR(full[1] / 20000.0, 0.3426, 0.02);
}

TEST(Sampler, RepetitionPenaltyDiscouragesSeenTokens) {
  Sampler sampler({.temperature = 0.0f, .repetition_penalty = 2.0f});
  const std::vector<int32_t> history = {1, 5};
  EXPECT_EQ(sampler.sample(kLogits, history).token, 2);
}

TEST(Sampler, RejectsOutOfRangeParameters) {
  EXPECT_THROW(Sampler({.temperature = -0.5f}), Error);
  EXPECT_THROW(Sampler({.top_p = 0.0f}), Error);
  EXPECT_THROW(Sampler({.min_p = 1.5f}), Error);
  EXPECT_THROW(Sampler({.top_k = -1}), Error);
}

TEST(StopStrings, HoldsBackPossibleStartsAndCutsAtTheStop) {
  StopStringMatcher matcher({"END", "\n\n"});
  EXPECT_EQ(matcher.push("hello E"), "hello ");
  EXPECT_EQ(matcher.push("N"), "");
  EXPECT_EQ(matcher.push("x"), "ENx");  // not a stop after all
  EXPECT_EQ(matcher.push(" done\n"), " done");
  EXPECT_EQ(matcher.push("\nmore"), "");
  EXPECT_TRUE(matcher.stopped());
  EXPECT_EQ(matcher.flush(), "");
  StopStringMatcher none;
  EXPECT_EQ(none.push("abc"), "abc");
}

}  // namespace
}  // namespace oscar
