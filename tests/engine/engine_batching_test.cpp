// The engine on the testbed: continuous batching gives every request exactly what it gets alone,
// preemption and pool exhaustion never fail a request, and cancellation returns pages.
#include <gtest/gtest.h>

#include <map>
#include <ostream>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "engine/json_object_grammar.h"
#include "model/model_weights.h"
#include "support/kv_configs.h"
#include "support/test_paths.h"
#include "support/testbed.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace oscar {
namespace {}  // namespace

// Readable failures for lists of TokenLogprob.
void PrintTo(const TokenLogprob& entry, std::ostream* out) {
  *out << "(" << entry.token << ", " << entry.logprob << ")";
}

namespace {

std::unique_ptr<Engine> make_test_engine(KvCacheConfig kv, KvPageCounts capacity, int64_t max_seqs,
                                         int64_t chunk = 64) {
  BackendOptions options;
  options.kv = kv;
  options.capacity = capacity;
  EngineOptions engine_options;
  engine_options.scheduler.max_num_seqs = max_seqs;
  engine_options.scheduler.prefill_chunk_tokens = chunk;
  engine_options.scheduler.max_step_tokens = 256;
  return std::make_unique<Engine>(make_backend(testing::testbed_weights(), options),
                                  &testing::testbed_tokenizer(), engine_options);
}

GenerationRequest greedy(const std::string& prompt, int64_t max_tokens) {
  GenerationRequest r;
  r.prompt = testing::testbed_tokenizer().encode(prompt);
  r.sampling.temperature = 0;
  r.stop.max_tokens = max_tokens;
  return r;
}

struct Finished {
  std::vector<int32_t> tokens;
  std::string text;
  FinishReason reason = FinishReason::none;
};

std::map<RequestId, Finished> run_all(Engine& engine) {
  std::map<RequestId, Finished> results;
  for (int steps = 0; !engine.idle(); ++steps) {
    EXPECT_LT(steps, 5000) << "engine does not finish";
    for (const RequestOutput& out : engine.step()) {
      Finished& f = results[out.id];
      f.tokens.insert(f.tokens.end(), out.tokens.begin(), out.tokens.end());
      f.text += out.text;
      if (out.finished) f.reason = out.finish_reason;
    }
  }
  return results;
}

const std::vector<std::string> kAllPrompts = {"The quick brown fox",
                                              "#include <linux/module.h>\nstatic int",
                                              "for (i = 0; i < n; i++)",
                                              "The pass key is 48213. Remember it.",
                                              "Debian packages are built from",
                                              "int main(void) {",
                                              "What is the pass key? The pass key is",
                                              "struct file_operations fops = {"};
const std::vector<std::string> kPrompts(kAllPrompts.begin(),
                                        kAllPrompts.begin() + (testing::kSanitized ? 4 : 8));

TEST(EngineBatching, BatchedRequestsEqualTheSameRequestsAlone) {
  std::vector<Finished> alone;
  for (const auto& prompt : kPrompts) {
    auto engine = make_test_engine(testing::small_window_int2(), {64, 64}, 1);
    engine->submit(greedy(prompt, 40));
    alone.push_back(run_all(*engine).begin()->second);
  }
  auto engine = make_test_engine(testing::small_window_int2(), {256, 256}, 8, /*chunk=*/5);
  std::vector<RequestId> ids;
  for (const auto& prompt : kPrompts) ids.push_back(engine->submit(greedy(prompt, 40)));
  const auto together = run_all(*engine);
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    EXPECT_EQ(together.at(ids[i]).tokens, alone[i].tokens) << kPrompts[i];
    EXPECT_EQ(together.at(ids[i]).text, alone[i].text);
    EXPECT_EQ(together.at(ids[i]).reason, FinishReason::length);
  }
  engine->reset_prefix_cache();
  EXPECT_EQ(engine->pools().full.free_pages(), 256);
  EXPECT_EQ(engine->pools().quantized.free_pages(), 256);
}

TEST(EngineBatching, ExhaustedPoolPreemptsAndStillFinishesEveryRequest) {
  std::vector<Finished> alone;
  for (const auto& prompt : kPrompts) {
    auto engine = make_test_engine(testing::small_window_int2(), {64, 64}, 1);
    engine->submit(greedy(prompt, 60));
    alone.push_back(run_all(*engine).begin()->second);
  }
  // Room for roughly three sequences at a time: the rest wait or are preempted and recomputed.
  auto engine = make_test_engine(testing::small_window_int2(), {14, 12}, 8);
  std::vector<RequestId> ids;
  for (const auto& prompt : kPrompts) ids.push_back(engine->submit(greedy(prompt, 60)));
  const auto together = run_all(*engine);
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    EXPECT_EQ(together.at(ids[i]).tokens, alone[i].tokens) << kPrompts[i];
  }
  EXPECT_GT(engine->scheduler().preemptions(), 0);
  engine->reset_prefix_cache();
  EXPECT_EQ(engine->pools().full.free_pages(), 14);
  EXPECT_EQ(engine->pools().quantized.free_pages(), 12);
}

// Prompt log-probabilities (echo in the API, perplexity) cover every prompt position exactly once:
// a prompt that the prefix cache holds is computed again whole (an attached prefix has no logits),
// and a sequence preempted and recomputed neither scores its prompt twice nor reports it twice.
TEST(EngineBatching, PromptLogprobsScoreEveryPositionOnce) {
  struct Scored {
    std::vector<float> logprobs;
    std::vector<std::vector<TokenLogprob>> top;
    int reports = 0;
    std::vector<int32_t> tokens;
  };
  auto scored_request = [](const std::string& prompt, int64_t max_tokens) {
    GenerationRequest request = greedy(prompt, max_tokens);
    request.prompt_logprobs = true;
    request.logprobs = true;
    request.top_logprobs = 2;
    return request;
  };
  auto run_scored = [](Engine& engine) {
    std::map<RequestId, Scored> results;
    for (int steps = 0; !engine.idle() && steps < 5000; ++steps) {
      for (const RequestOutput& out : engine.step()) {
        Scored& s = results[out.id];
        if (!out.prompt_logprobs.empty()) {
          ++s.reports;
          s.logprobs = out.prompt_logprobs;
          s.top = out.prompt_top_logprobs;
        }
        s.tokens.insert(s.tokens.end(), out.tokens.begin(), out.tokens.end());
      }
    }
    return results;
  };

  // Three pages of 64 tokens: the cache keeps whole pages.
  std::string long_prompt;
  for (const auto& prompt : kAllPrompts) long_prompt += prompt + "\n";
  long_prompt += long_prompt + long_prompt;
  auto engine = make_test_engine(KvCacheConfig{}, {64, 0}, 2);
  const GenerationRequest request = scored_request(long_prompt, 0);
  ASSERT_GT(request.prompt.size(), 128u);
  const RequestId fresh = engine->submit(request);
  const Scored reference = run_scored(*engine).at(fresh);
  ASSERT_EQ(reference.reports, 1);
  ASSERT_EQ(reference.logprobs.size(), request.prompt.size() - 1);
  ASSERT_EQ(reference.top.size(), request.prompt.size() - 1);
  for (size_t i = 0; i < reference.top.size(); ++i) {
    ASSERT_EQ(reference.top[i].size(), 2u);
    EXPECT_GE(reference.top[i][0].logprob, reference.logprobs[i]);
  }
  // The prompt is in the prefix cache now (a plain request finds it there), yet scored whole.
  const RequestId plain = engine->submit(greedy(long_prompt, 1));
  int64_t plain_cached = 0;
  for (int steps = 0; !engine->idle() && steps < 100; ++steps) {
    for (const RequestOutput& out : engine->step()) {
      if (out.id == plain) plain_cached = out.cached_prompt_tokens;
    }
  }
  EXPECT_GT(plain_cached, 0);
  const RequestId cached = engine->submit(request);
  const Scored again = run_scored(*engine).at(cached);
  EXPECT_EQ(again.reports, 1);
  EXPECT_EQ(again.logprobs, reference.logprobs);
  EXPECT_EQ(again.top, reference.top);

  // Room for about three sequences: the others are preempted and recomputed.
  std::vector<Scored> alone;
  for (const auto& prompt : kPrompts) {
    auto single = make_test_engine(testing::small_window_int2(), {64, 64}, 1);
    const RequestId id = single->submit(scored_request(prompt, 60));
    alone.push_back(run_scored(*single).at(id));
  }
  auto tight = make_test_engine(testing::small_window_int2(), {14, 12}, 8);
  std::vector<RequestId> ids;
  for (const auto& prompt : kPrompts) ids.push_back(tight->submit(scored_request(prompt, 60)));
  const auto together = run_scored(*tight);
  EXPECT_GT(tight->scheduler().preemptions(), 0);
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    const Scored& got = together.at(ids[i]);
    EXPECT_EQ(got.reports, 1) << kPrompts[i];
    EXPECT_EQ(got.tokens, alone[i].tokens) << kPrompts[i];
    ASSERT_EQ(got.logprobs.size(), alone[i].logprobs.size()) << kPrompts[i];
    ASSERT_EQ(got.top.size(), alone[i].top.size()) << kPrompts[i];
    for (size_t k = 0; k < got.logprobs.size(); ++k) {
      EXPECT_NEAR(got.logprobs[k], alone[i].logprobs[k], 1e-3f)
          << kPrompts[i] << " position " << k + 1;
    }
  }
}

TEST(EngineBatching, CancelReturnsPagesAndOthersContinue) {
  auto engine = make_test_engine(testing::small_window_int2(), {64, 64}, 4);
  const RequestId keep = engine->submit(greedy(kPrompts[0], 30));
  const RequestId drop = engine->submit(greedy(kPrompts[1], 200));
  for (int i = 0; i < 10; ++i) engine->step();
  engine->cancel(drop);
  const auto results = run_all(*engine);
  EXPECT_EQ(results.at(keep).reason, FinishReason::length);
  EXPECT_EQ(results.at(drop).reason, FinishReason::cancelled);
  engine->reset_prefix_cache();
  EXPECT_EQ(engine->pools().full.free_pages(), 64);
}

// Runs the engine until it is idle; the prompt log-probabilities request `id` got.
std::vector<float> prompt_logprobs_of(Engine& engine, RequestId id) {
  std::vector<float> logprobs;
  for (int steps = 0; !engine.idle() && steps < 100; ++steps) {
    for (const auto& out : engine.step()) {
      if (out.id == id && !out.prompt_logprobs.empty()) logprobs = out.prompt_logprobs;
    }
  }
  return logprobs;
}

// Each new token's log-probability, and the most likely tokens at it, come back where the request
// asks for them, and only there (beside a request that does not, batched with it: the same tokens,
// no log-probabilities), and the log-probability is the log-softmax of the token's row: the prompt
// followed by the generated tokens, scored through the prompt-logprob path, gives the same values.
TEST(EngineBatching, TokenLogprobsOnlyWhereAsked) {
  auto engine = make_test_engine(KvCacheConfig{}, {64, 0}, 2);
  GenerationRequest asked = greedy("The quick brown fox", 6);
  asked.logprobs = true;
  asked.top_logprobs = 3;
  const GenerationRequest silent = greedy("The quick brown fox", 6);
  const RequestId asked_id = engine->submit(asked), silent_id = engine->submit(silent);
  std::map<RequestId, std::vector<int32_t>> tokens;
  std::map<RequestId, std::vector<float>> logprobs;
  std::map<RequestId, std::vector<std::vector<TokenLogprob>>> tops;
  for (int steps = 0; !engine->idle() && steps < 100; ++steps) {
    for (const auto& out : engine->step()) {
      tokens[out.id].insert(tokens[out.id].end(), out.tokens.begin(), out.tokens.end());
      logprobs[out.id].insert(logprobs[out.id].end(), out.logprobs.begin(), out.logprobs.end());
      tops[out.id].insert(tops[out.id].end(), out.top_logprobs.begin(), out.top_logprobs.end());
    }
  }
  ASSERT_EQ(tokens[asked_id].size(), 6u);
  EXPECT_EQ(tokens[asked_id], tokens[silent_id]);
  EXPECT_TRUE(logprobs[silent_id].empty());
  EXPECT_TRUE(tops[silent_id].empty());
  ASSERT_EQ(logprobs[asked_id].size(), 6u);
  // Greedy: the sampled token heads each list of the three most likely, with its own value.
  ASSERT_EQ(tops[asked_id].size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    ASSERT_EQ(tops[asked_id][i].size(), 3u);
    EXPECT_EQ(tops[asked_id][i][0], (TokenLogprob{tokens[asked_id][i], logprobs[asked_id][i]}));
    EXPECT_GE(tops[asked_id][i][1].logprob, tops[asked_id][i][2].logprob);
  }
  GenerationRequest scored = greedy("The quick brown fox", 0);
  scored.prompt.insert(scored.prompt.end(), tokens[asked_id].begin(), tokens[asked_id].end());
  scored.prompt_logprobs = true;
  const std::vector<float> prompt_logprobs = prompt_logprobs_of(*engine, engine->submit(scored));
  ASSERT_EQ(prompt_logprobs.size(), scored.prompt.size() - 1);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_LT(logprobs[asked_id][i], 0.0f);
    EXPECT_NEAR(logprobs[asked_id][i], prompt_logprobs[prompt_logprobs.size() - 6 + i], 1e-3f)
        << "token " << i;
  }
}

TEST(EngineBatching, PromptLogprobsAndStops) {
  auto engine = make_test_engine(KvCacheConfig{}, {64, 0}, 2);
  GenerationRequest scored = greedy("The quick brown fox jumps over the lazy dog", 0);
  scored.prompt_logprobs = true;
  const RequestId id = engine->submit(scored);
  GenerationRequest stopped = greedy("The quick brown fox", 16);
  stopped.stop.stop_strings = {"sixth"};
  const RequestId stop_id = engine->submit(stopped);
  const std::vector<float> logprobs = prompt_logprobs_of(*engine, id);
  EXPECT_EQ(logprobs.size(), scored.prompt.size() - 1);
  for (const float lp : logprobs) EXPECT_LT(lp, 0.0f);
  auto engine2 = make_test_engine(KvCacheConfig{}, {64, 0}, 1);
  engine2->submit(stopped);
  const auto result = run_all(*engine2).begin()->second;
  EXPECT_EQ(result.text, "es, and the\n      ");
  EXPECT_EQ(result.reason, FinishReason::stop);
  (void)stop_id;
}

// vLLM's stop_token_ids and min_tokens: a listed token ends the sequence (the last token, its text
// not shown); before min_tokens no stop token is drawn and no stop string ends the text.
TEST(EngineBatching, StopTokenIdsAndMinTokens) {
  auto engine = make_test_engine(KvCacheConfig{}, {64, 0}, 4);
  const GenerationRequest plain = greedy("The quick brown fox", 16);
  engine->submit(plain);
  const Finished free_run = run_all(*engine).begin()->second;
  ASSERT_EQ(free_run.tokens.size(), 16u);
  const std::vector<int32_t>& t = free_run.tokens;
  ASSERT_TRUE(t[2] != t[0] && t[2] != t[1] && t[2] != t[3]);
  ASSERT_NE(free_run.text.find("sixth"), std::string::npos);

  GenerationRequest stop_token = plain;
  stop_token.stop.stop_token_ids = {t[2]};
  GenerationRequest held = stop_token;
  held.stop.min_tokens = 4;
  GenerationRequest no_stop_string = plain;
  no_stop_string.stop.stop_strings = {"sixth"};
  no_stop_string.stop.min_tokens = 16;
  const RequestId stop_id = engine->submit(stop_token), held_id = engine->submit(held);
  const RequestId string_id = engine->submit(no_stop_string);
  auto results = run_all(*engine);

  EXPECT_EQ(results[stop_id].tokens, std::vector<int32_t>(t.begin(), t.begin() + 3));
  EXPECT_EQ(results[stop_id].reason, FinishReason::stop);
  EXPECT_EQ(results[stop_id].text,
            testing::testbed_tokenizer().decode(std::vector<int32_t>(t.begin(), t.begin() + 2)));

  const std::vector<int32_t>& h = results[held_id].tokens;
  ASSERT_GE(h.size(), 4u);
  EXPECT_EQ(h[0], t[0]);
  EXPECT_EQ(h[1], t[1]);
  for (size_t i = 0; i < 4; ++i)
    EXPECT_NE(h[i], t[2]) << "stop token drawn at " << i << " before min_tokens";
  if (h.size() < 16) {
    EXPECT_EQ(h.back(), t[2]);  // it may end later, only at the stop token
  }

  EXPECT_EQ(results[string_id].text, free_run.text);  // "sixth" came before min_tokens: no stop
  EXPECT_EQ(results[string_id].reason, FinishReason::length);
}

// JSON mode: whatever the model would write (the testbed, left alone, writes code and prose), the
// text is a prefix of a JSON object, and the sequence ends, with reason stop, when the object
// closes.
TEST(EngineBatching, JsonObjectModeWritesOneObject) {
  auto engine = make_test_engine(KvCacheConfig{}, {64, 0}, 4);
  std::map<RequestId, std::string> prompts;
  for (const std::string prompt : {"The quick brown fox", "{\"name\": \"Alice\", \"age\": 30}\n",
                                   "x = {'a': [1, 2], 'b': 'c'}\ny = "}) {
    GenerationRequest request = greedy(prompt, 96);
    request.json_object = true;
    prompts[engine->submit(request)] = prompt;
  }
  const auto results = run_all(*engine);
  int closed = 0;
  for (const auto& [id, result] : results) {
    JsonObjectGrammar grammar;
    EXPECT_TRUE(grammar.feed(result.text)) << prompts[id] << ": " << result.text;
    if (result.reason == FinishReason::stop) {
      EXPECT_TRUE(grammar.complete()) << result.text;
      EXPECT_TRUE(nlohmann::json::parse(result.text).is_object()) << result.text;
      ++closed;
    } else {
      EXPECT_EQ(result.reason, FinishReason::length);
    }
  }
  EXPECT_GE(closed, 1);
}

TEST(EngineBatching, RejectsRequestsThatCanNeverRun) {
  auto engine = make_test_engine(testing::small_window_int2(), {8, 8}, 2);
  EXPECT_THROW(engine->submit(greedy("hello", 5000)), Error);  // needs more pages than the pool
  GenerationRequest empty;
  EXPECT_THROW(engine->submit(empty), Error);
  GenerationRequest bad_token = greedy("hi", 4);
  bad_token.prompt.push_back(99999);
  EXPECT_THROW(engine->submit(bad_token), Error);
  EXPECT_THROW(engine->submit(greedy("hi", 0)), Error);
  GenerationRequest bad_bias = greedy("hi", 4);
  bad_bias.sampling.logit_bias = {{99999, 1.0f}};
  EXPECT_THROW(engine->submit(bad_bias), Error);
  GenerationRequest too_many_top = greedy("hi", 4);
  too_many_top.logprobs = true;
  too_many_top.top_logprobs = kMaxTopLogprobs + 1;
  EXPECT_THROW(engine->submit(too_many_top), Error);
  GenerationRequest min_above_max = greedy("hi", 4);
  min_above_max.stop.min_tokens = 5;
  EXPECT_THROW(engine->submit(min_above_max), Error);
  GenerationRequest bad_stop_id = greedy("hi", 4);
  bad_stop_id.stop.stop_token_ids = {99999};
  EXPECT_THROW(engine->submit(bad_stop_id), Error);
}

}  // namespace
}  // namespace oscar
