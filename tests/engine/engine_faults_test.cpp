// What the engine does with a model or a request that could end it: a padded vocabulary's ids
// beyond the tokenizer are never sampled nor scored; a step that fails ends the request at fault
// with the error while the requests beside it go on; and a failure no request is at fault for ends
// those in flight, after which the engine serves new requests.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "engine/engine.h"
#include "model/model_weights.h"
#include "support/failing_backend.h"
#include "support/padded_vocab_model.h"
#include "support/test_paths.h"
#include "support/testbed.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace oscar {
namespace {

struct FinishedOrFailed {
  std::vector<int32_t> tokens;
  std::vector<std::vector<TokenLogprob>> top_logprobs;
  FinishReason reason = FinishReason::none;
  std::string error;
};

std::map<RequestId, FinishedOrFailed> run_until_idle(Engine& engine) {
  std::map<RequestId, FinishedOrFailed> results;
  for (int steps = 0; !engine.idle() && steps < 1000; ++steps) {
    for (const RequestOutput& out : engine.step()) {
      FinishedOrFailed& f = results[out.id];
      f.tokens.insert(f.tokens.end(), out.tokens.begin(), out.tokens.end());
      f.top_logprobs.insert(f.top_logprobs.end(), out.top_logprobs.begin(), out.top_logprobs.end());
      if (out.finished) f.reason = out.finish_reason;
      if (!out.error.empty()) f.error = out.error;
    }
  }
  EXPECT_TRUE(engine.idle()) << "the engine did not finish";
  return results;
}

EngineOptions engine_options() {
  EngineOptions options;
  options.scheduler.max_num_seqs = 8;
  options.scheduler.prefill_chunk_tokens = 64;
  options.scheduler.max_step_tokens = 256;
  return options;
}

BackendOptions backend_options() {
  BackendOptions options;
  options.capacity = {64, 0};
  return options;
}

GenerationRequest request(std::vector<int32_t> prompt, float temperature, int64_t max_tokens) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.sampling.temperature = temperature;
  r.sampling.seed = 7;
  r.stop.max_tokens = max_tokens;
  r.logprobs = true;
  r.top_logprobs = 5;
  return r;
}

struct PaddedModel {
  std::string dir = testing::make_padded_vocab_model("padded-vocab");
  ModelWeights weights = load_model(dir);
  Tokenizer tokenizer = Tokenizer::load(dir);
};

TEST(EngineFaults, PaddedVocabularyIdsAreNeverSampled) {
  const PaddedModel model;
  ASSERT_GT(model.weights.config.vocab_size, testing::kTestbedVocabulary);
  const std::vector<int32_t> prompt = model.tokenizer.encode("The quick brown fox");
  // Unmasked, the padding wins: the largest logit after the prompt is one of its ids.
  {
    auto backend = make_backend(model.weights, backend_options());
    SequencePages pages;
    KvPagePools pools(backend->kv_capacity());
    ASSERT_TRUE(pages.reserve(int64_t(prompt.size()), backend->kv_config(), pools));
    const SequenceStep step{prompt, &pages, false};
    StepLogits logits;
    backend->forward({&step, 1}, logits);
    ASSERT_EQ(logits.vocab_size, model.weights.config.vocab_size);
    const float* row = logits.row(0);
    EXPECT_GE(std::max_element(row, row + logits.vocab_size) - row, testing::kTestbedVocabulary);
  }
  Engine engine(make_backend(model.weights, backend_options()), &model.tokenizer, engine_options());
  EXPECT_EQ(engine.vocabulary_size(), testing::kTestbedVocabulary);
  std::vector<RequestId> ids = {engine.submit(request(prompt, 0.0f, 24)),
                                engine.submit(request(prompt, 1.0f, 24)),
                                engine.submit(request(prompt, 2.0f, 24))};
  GenerationRequest json = request(prompt, 1.0f, 24);
  json.json_object = true;
  ids.push_back(engine.submit(std::move(json)));
  const auto results = run_until_idle(engine);
  for (const RequestId id : ids) {
    const FinishedOrFailed& f = results.at(id);
    EXPECT_TRUE(f.error.empty()) << f.error;
    EXPECT_NE(f.reason, FinishReason::error);
    ASSERT_FALSE(f.tokens.empty());
    for (const int32_t token : f.tokens)
      EXPECT_LT(token, testing::kTestbedVocabulary) << "request " << id;
    for (const auto& top : f.top_logprobs) {
      ASSERT_EQ(top.size(), 5u);
      for (const TokenLogprob& entry : top) EXPECT_LT(entry.token, testing::kTestbedVocabulary);
    }
  }
  // An id without a token is refused in a prompt, as an id past the config's vocabulary is.
  try {
    engine.submit(request({1, 2, int32_t(testing::kTestbedVocabulary)}, 0.0f, 4));
    ADD_FAILURE() << "accepted a prompt id that has no token";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("outside the vocabulary (0..8191)"), std::string::npos)
        << error.what();
  }
}

constexpr int32_t kFailingToken = 7777;

TEST(EngineFaults, AFailedStepEndsOnlyTheRequestAtFault) {
  const std::vector<std::vector<int32_t>> prompts = {
      testing::testbed_tokenizer().encode("The quick brown fox"),
      testing::testbed_tokenizer().encode("int main(void) {"),
      testing::testbed_tokenizer().encode("Debian packages are built from")};
  // Each request alone, on the real backend.
  std::vector<std::vector<int32_t>> alone;
  for (const auto& prompt : prompts) {
    Engine engine(make_backend(testing::testbed_weights(), backend_options()),
                  &testing::testbed_tokenizer(), engine_options());
    const RequestId id = engine.submit(request(prompt, 0.0f, 12));
    alone.push_back(run_until_idle(engine).at(id).tokens);
  }
  // Together, with a fourth whose prompt makes every step holding it fail: batched with the others
  // in its first step, it alone ends with the error.
  Engine engine(std::make_unique<testing::FailingBackend>(
                    make_backend(testing::testbed_weights(), backend_options()), kFailingToken),
                &testing::testbed_tokenizer(), engine_options());
  std::vector<RequestId> ids;
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (i == 1) ids.push_back(engine.submit(request({1, 2, kFailingToken, 3}, 0.0f, 12)));
    ids.push_back(engine.submit(request(prompts[i], 0.0f, 12)));
  }
  const RequestId at_fault = ids[1];
  auto results = run_until_idle(engine);
  EXPECT_EQ(results.at(at_fault).reason, FinishReason::error);
  EXPECT_NE(results.at(at_fault).error.find("a step holds token 7777"), std::string::npos)
      << results.at(at_fault).error;
  EXPECT_TRUE(results.at(at_fault).tokens.empty());
  for (size_t i = 0; i < prompts.size(); ++i) {
    const FinishedOrFailed& f = results.at(ids[i < 1 ? i : i + 1]);
    EXPECT_EQ(f.reason, FinishReason::length) << f.error;
    EXPECT_EQ(f.tokens, alone[i]) << "prompt " << i;
  }
  // Every page came back (the prefix cache's too, once dropped), and the engine serves the next
  // request.
  engine.reset_prefix_cache();
  EXPECT_EQ(engine.pools().full.used_pages(), 0);
  const RequestId next = engine.submit(request(prompts[0], 0.0f, 12));
  EXPECT_EQ(run_until_idle(engine).at(next).tokens, alone[0]);
}

TEST(EngineFaults, AbortAllEndsEveryRequestAndTheEngineGoesOn) {
  Engine engine(make_backend(testing::testbed_weights(), backend_options()),
                &testing::testbed_tokenizer(), engine_options());
  const std::vector<int32_t> prompt = testing::testbed_tokenizer().encode("The quick brown fox");
  std::vector<RequestId> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(engine.submit(request(prompt, 0.0f, 12)));
  engine.step();  // the requests are running, and hold pages
  ids.push_back(engine.submit(request(prompt, 0.0f, 12)));  // and one waiting
  const std::vector<RequestOutput> outputs = engine.abort_all("the engine failed: test");
  ASSERT_EQ(outputs.size(), ids.size());
  for (const RequestOutput& output : outputs) {
    EXPECT_TRUE(output.finished);
    EXPECT_EQ(output.finish_reason, FinishReason::error);
    EXPECT_EQ(output.error, "the engine failed: test");
  }
  EXPECT_TRUE(engine.idle());
  engine.reset_prefix_cache();
  EXPECT_EQ(engine.pools().full.used_pages(), 0);
  const RequestId next = engine.submit(request(prompt, 0.0f, 12));
  const auto results = run_until_idle(engine);
  EXPECT_EQ(results.at(next).reason, FinishReason::length);
  EXPECT_EQ(results.at(next).tokens.size(), 12u);
}

}  // namespace
}  // namespace oscar
