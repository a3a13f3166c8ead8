// The JSON a streamed request sees: tokens whose text is held back (a partial UTF-8 character, a
// possible stop string) keep their log-probabilities and their most likely tokens, which arrive
// with the next chunk that shows text, so the stream reports every sampled token once, as the
// non-streamed response does.
#include <gtest/gtest.h>

#include "server/openai_response.h"
#include "support/test_paths.h"
#include "tokenizer/tokenizer.h"

namespace oscar::testing {
namespace {

RequestOutput step(std::vector<int32_t> tokens, std::vector<float> logprobs, std::string text,
                   bool finished = false) {
  RequestOutput output;
  output.tokens = std::move(tokens);
  output.logprobs = std::move(logprobs);
  for (size_t i = 0; i < output.tokens.size(); ++i) {
    output.top_logprobs.push_back(
        {{output.tokens[i], output.logprobs[i]}, {7, output.logprobs[i] - 1.0f}});
  }
  output.text = std::move(text);
  output.finished = finished;
  if (finished) output.finish_reason = FinishReason::length;
  output.generated_tokens = 4;
  return output;
}

TEST(ResponseBuilder, HeldBackTokensKeepTheirLogprobs) {
  const Tokenizer tokenizer = Tokenizer::load(testbed_model_dir());
  const ServedModel model = make_served_model("testbed", tokenizer, "Qwen3ForCausalLM", {}, 512);
  for (const Endpoint endpoint : {Endpoint::completions, Endpoint::chat_completions}) {
    ApiRequest request;
    request.endpoint = endpoint;
    request.prompts = {{1, 2, 3}};
    request.stream = true;
    request.logprobs = true;
    request.generation.top_logprobs = 2;
    ResponseBuilder builder(request, model);
    std::vector<float> streamed, streamed_top;
    auto collect = [&](const std::optional<nlohmann::json>& chunk) {
      if (!chunk) return;
      const auto& logprobs = (*chunk)["choices"][0]["logprobs"];
      if (endpoint == Endpoint::completions) {
        for (const auto& value : logprobs["token_logprobs"]) streamed.push_back(value.get<float>());
        EXPECT_EQ(logprobs["tokens"].size(), logprobs["token_logprobs"].size());
        ASSERT_EQ(logprobs["top_logprobs"].size(), logprobs["tokens"].size());
        for (size_t i = 0; i < logprobs["tokens"].size(); ++i) {
          streamed_top.push_back(
              logprobs["top_logprobs"][i][logprobs["tokens"][i].get<std::string>()].get<float>());
        }
      } else {
        for (const auto& entry : logprobs["content"]) {
          streamed.push_back(entry["logprob"].get<float>());
          ASSERT_EQ(entry["top_logprobs"].size(), 2u);
          streamed_top.push_back(entry["top_logprobs"][0]["logprob"].get<float>());
          EXPECT_EQ(entry["top_logprobs"][1]["logprob"].get<float>(),
                    entry["logprob"].get<float>() - 1.0f);
        }
      }
    };
    collect(builder.chunk(step({10}, {-0.5f}, "a")));
    const auto held = builder.chunk(step({11}, {-1.5f}, ""));  // text held back
    EXPECT_FALSE(held.has_value());
    collect(held);
    collect(builder.chunk(step({12}, {-2.5f}, "bc")));
    collect(builder.chunk(step({13}, {-3.5f}, "d", true)));
    EXPECT_EQ(streamed, (std::vector<float>{-0.5f, -1.5f, -2.5f, -3.5f})) << int(endpoint);
    EXPECT_EQ(streamed_top, streamed) << int(endpoint);
  }
}

}  // namespace
}  // namespace oscar::testing
