// Sampling rules and stop strings.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "engine/sampler.h"
#include "engine/stop_strings.h"
#include "util/error.h"

namespace oscar {
namespace {

const std::vector<float> kLogits = {1.0f, 3.0f, 2.5f, -1.0f, 0.5f, 2.9f};

TEST(Sampler, GreedyPicksTheArgmaxAndItsLogprobIsTheLogSoftmax) {
  Sampler sampler({.temperature = 0.0f});
  const int32_t token = sampler.sample(kLogits, {});
  EXPECT_EQ(token, 1);
  double z = 0;
  for (const float v : kLogits) z += std::exp(v);
  EXPECT_NEAR(token_logprob(kLogits, token), 3.0 - std::log(z), 1e-5);
}

// A row with a NaN (a broken checkpoint) still gives a token id inside the vocabulary.
TEST(Sampler, GreedyOnARowWithANanGivesAValidToken) {
  std::vector<float> logits = kLogits;
  logits[0] = std::nanf("");  // first: maxCoeff then returns NaN, which std::find cannot find
  Sampler sampler({.temperature = 0.0f});
  const int32_t token = sampler.sample(logits, {});
  EXPECT_GE(token, 0);
  EXPECT_LT(token, int32_t(logits.size()));
}

TEST(Sampler, SeedMakesDrawsRepeatable) {
  Sampler a({.temperature = 1.0f, .seed = 5}), b({.temperature = 1.0f, .seed = 5});
  for (int i = 0; i < 50; ++i) EXPECT_EQ(a.sample(kLogits, {}), b.sample(kLogits, {}));
}

std::map<int32_t, int> histogram(SamplingParams params, int draws) {
  params.seed = 11;
  Sampler sampler(params);
  std::map<int32_t, int> counts;
  for (int i = 0; i < draws; ++i) ++counts[sampler.sample(kLogits, {})];
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

// Without top-k, top-p and min-p sort only as many candidates as their cut needs (256, then 8
// times as many): here the cut lies past the first 256, among 400 tokens of equal logits
// scattered over a vocabulary of 4000, so the head has to grow, and ties go by token id.
TEST(Sampler, TopPAndMinPCutDeepIntoALargeVocabulary) {
  std::vector<float> logits(4000, 0.0f);
  std::vector<int32_t> likely;
  for (int32_t t = 7; likely.size() < 400; t += 9) {
    logits[size_t(t)] = 5.0f;
    likely.push_back(t);
  }
  // Each likely token holds e^5 / (400 e^5 + 3600) of the mass: top_p 0.9 keeps the first 382.
  const double each = std::exp(5.0) / (400 * std::exp(5.0) + 3600);
  const size_t kept = size_t(std::ceil(0.9 / each));
  ASSERT_EQ(kept, 382u);
  Sampler top_p({.temperature = 1.0f, .top_p = 0.9f, .seed = 3});
  std::set<int32_t> drawn;
  for (int i = 0; i < 8000; ++i) drawn.insert(top_p.sample(logits, {}));
  EXPECT_EQ(drawn, std::set<int32_t>(likely.begin(), likely.begin() + long(kept)));
  // min_p 0.5 keeps the 400 likely tokens (the others are e^-5 as likely), none of the rest.
  Sampler min_p({.temperature = 1.0f, .min_p = 0.5f, .seed = 4});
  drawn.clear();
  for (int i = 0; i < 8000; ++i) drawn.insert(min_p.sample(logits, {}));
  EXPECT_EQ(drawn, std::set<int32_t>(likely.begin(), likely.end()));
}

TEST(Sampler, RepetitionPenaltyDiscouragesSeenTokens) {
  Sampler sampler({.temperature = 0.0f, .repetition_penalty = 2.0f});
  const std::vector<int32_t> history = {1, 5};
  EXPECT_EQ(sampler.sample(kLogits, history), 2);
}

// The bias is added to the logits the rules read: +1 lifts token 2 (2.5) over token 1 (3.0), -100
// removes token 1 so that token 5 (2.9) wins; ids beyond the row take none. With the repetition
// penalty, the penalized logits are biased: token 1 halved to 1.5, then +1.45 lifts it to 2.95,
// over token 5 (biased first, (3 + 1.45) / 2 would leave it below).
TEST(Sampler, LogitBiasIsAddedToTheLogits) {
  EXPECT_EQ(Sampler({.temperature = 0.0f, .logit_bias = {{2, 1.0f}}}).sample(kLogits, {}), 2);
  EXPECT_EQ(Sampler({.temperature = 0.0f, .logit_bias = {{1, -100.0f}, {99, 100.0f}}})
                .sample(kLogits, {}),
            5);
  const std::vector<int32_t> history = {1};
  EXPECT_EQ(Sampler({.temperature = 0.0f, .repetition_penalty = 2.0f, .logit_bias = {{1, 1.45f}}})
                .sample(kLogits, history),
            1);
  // At temperature 1, a -100 bias leaves the token out of 2000 draws.
  auto counts = histogram({.temperature = 1.0f, .logit_bias = {{1, -100.0f}}}, 2000);
  EXPECT_EQ(counts.count(1), 0u);
  EXPECT_EQ(counts.size(), 5u);
}

// The most likely tokens come most likely first, ties by id, with the log-softmax's values.
TEST(Sampler, TopLogprobsAreTheMostLikelyTokens) {
  const std::vector<TokenLogprob> top = top_logprobs(kLogits, 3);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].token, 1);
  EXPECT_EQ(top[1].token, 5);
  EXPECT_EQ(top[2].token, 2);
  for (const TokenLogprob& t : top) EXPECT_EQ(t.logprob, token_logprob(kLogits, t.token));
  const std::vector<float> ties = {0.0f, 2.0f, 1.0f, 2.0f, 2.0f};
  const std::vector<TokenLogprob> tied = top_logprobs(ties, 2);
  ASSERT_EQ(tied.size(), 2u);
  EXPECT_EQ(tied[0].token, 1);
  EXPECT_EQ(tied[1].token, 3);
  EXPECT_EQ(top_logprobs(kLogits, 10).size(), kLogits.size());
  EXPECT_TRUE(top_logprobs(kLogits, 0).empty());
}

TEST(Sampler, RejectsOutOfRangeParameters) {
  EXPECT_THROW(Sampler({.temperature = -0.5f}), Error);
  EXPECT_THROW(Sampler({.top_p = 0.0f}), Error);
  EXPECT_THROW(Sampler({.min_p = 1.5f}), Error);
  EXPECT_THROW(Sampler({.top_k = -1}), Error);
  EXPECT_THROW(Sampler({.logit_bias = {{3, 100.5f}}}), Error);
  EXPECT_THROW(Sampler({.logit_bias = {{-1, 1.0f}}}), Error);
  EXPECT_THROW(Sampler({.logit_bias = {{3, std::nanf("")}}}), Error);
  EXPECT_THROW(Sampler({.frequency_penalty = 2.5f}), Error);
  EXPECT_THROW(Sampler({.presence_penalty = std::nanf("")}), Error);
}

// OpenAI's penalties count the generated tokens only (the history's part after the prompt): each
// occurrence takes the frequency penalty, the first also the presence penalty. Token 1 (3.0) leads
// token 5 (2.9) by 0.1.
TEST(Sampler, FrequencyAndPresencePenaltiesCountTheGeneratedTokens) {
  auto greedy = [](float frequency, float presence, std::vector<int32_t> history,
                   size_t prompt_size) {
    Sampler sampler(
        {.temperature = 0.0f, .frequency_penalty = frequency, .presence_penalty = presence});
    return sampler.sample(kLogits, history, prompt_size);
  };
  EXPECT_EQ(greedy(0.04f, 0.0f, {1, 1}, 0), 1);       // 3.0 - 0.08 = 2.92
  EXPECT_EQ(greedy(0.04f, 0.0f, {1, 1, 1}, 0), 5);    // 2.88: every occurrence counts
  EXPECT_EQ(greedy(0.0f, 0.05f, {1, 1, 1}, 0), 1);    // 2.95: presence counts once
  EXPECT_EQ(greedy(0.0f, 0.2f, {1}, 0), 5);           // 2.8
  EXPECT_EQ(greedy(2.0f, 2.0f, {1, 1, 1, 2}, 3), 1);  // the prompt's 1s count for nothing; 2 falls
  EXPECT_EQ(greedy(-0.6f, 0.0f, {0, 2}, 1), 2);       // a negative penalty lifts 2 to 3.1
  // The same sampler again: the per-call marks are cleared (presence counted once per call).
  Sampler sampler({.temperature = 0.0f, .presence_penalty = 0.05f});
  const std::vector<int32_t> history = {1};
  EXPECT_EQ(sampler.sample(kLogits, history), 1);
  EXPECT_EQ(sampler.sample(kLogits, history), 1);
}

// Excluded tokens (a request's stop tokens before its min_tokens) are never drawn; ids beyond the
// row are ignored, and a row with every token excluded still gives a token of the row.
TEST(Sampler, ExcludedTokensAreNeverDrawn) {
  const std::vector<int32_t> excluded = {1, 99};
  EXPECT_EQ(Sampler({.temperature = 0.0f}).sample(kLogits, {}, 0, excluded), 5);
  Sampler drawing({.temperature = 1.0f, .top_p = 0.9f, .seed = 7});
  const std::vector<int32_t> both = {1, 5};
  std::set<int32_t> drawn;
  for (int i = 0; i < 2000; ++i) drawn.insert(drawing.sample(kLogits, {}, 0, both));
  EXPECT_EQ(drawn.count(1) + drawn.count(5), 0u);
  EXPECT_TRUE(drawn.count(2));
  const std::vector<int32_t> all = {0, 1, 2, 3, 4, 5};
  const int32_t token = Sampler({.temperature = 1.0f, .seed = 2}).sample(kLogits, {}, 0, all);
  EXPECT_GE(token, 0);
  EXPECT_LT(token, int32_t(kLogits.size()));
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

// vLLM's include_stop_str_in_output: the stop string is released, what follows it is not.
TEST(StopStrings, KeepsTheStopStringWhereAsked) {
  StopStringMatcher matcher({"END", "\n\n"}, true);
  EXPECT_EQ(matcher.push("done E"), "done ");
  EXPECT_EQ(matcher.push("ND and more"), "END");
  EXPECT_TRUE(matcher.stopped());
  EXPECT_EQ(matcher.flush(), "");
  StopStringMatcher earliest({"cd", "abcdef"}, true);
  EXPECT_EQ(earliest.push("xabcdefg"), "xabcdef");  // the stop that starts first, whole
}

// Before a request's min_tokens no stop string may end in the text; one that starts there and ends
// in later text still stops.
TEST(StopStrings, NoStopEndsInTextPushedBeforeMinTokens) {
  StopStringMatcher matcher({"END"});
  EXPECT_EQ(matcher.push("a END b E", false), "a END b ");
  EXPECT_FALSE(matcher.stopped());
  EXPECT_EQ(matcher.push("N", false), "");  // "EN" held back: it may still become a stop
  EXPECT_EQ(matcher.push("D tail"), "");    // "END" ends in checked text: a stop
  EXPECT_TRUE(matcher.stopped());
  StopStringMatcher whole({"END"});
  EXPECT_EQ(whole.push("xEND", false), "xEND");
  EXPECT_EQ(whole.push("y"), "y");  // the stop ended before: it does not stop now
  EXPECT_FALSE(whole.stopped());
  EXPECT_EQ(whole.push("END"), "");
  EXPECT_TRUE(whole.stopped());
}

}  // namespace
}  // namespace oscar
