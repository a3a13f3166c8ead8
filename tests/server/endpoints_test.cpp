// The API surface a client sees: chat completions streamed (role first, content deltas, a finish
// reason, [DONE]) and not, plain completions equal in both modes, /v1/models and /health.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "server_fixture.h"
#include "support/test_paths.h"
#include "tokenizer/tokenizer.h"

namespace oscar::testing {
namespace {

using nlohmann::json;

// A greedy completion of exactly `max_tokens` tokens, not streamed.
json unstreamed_body(const std::string& prompt, int64_t max_tokens) {
  json body = greedy_body(prompt, max_tokens);
  body["stream"] = false;
  body.erase("stream_options");
  return body;
}

// The reply to `body` at `path`, which must succeed (null where it did not).
json post_ok(const TestServer& server, const std::string& path, const json& body) {
  const httplib::Result result = server.client().Post(path, body.dump(), "application/json");
  EXPECT_TRUE(result) << path;
  if (!result) return nullptr;
  EXPECT_EQ(result->status, 200) << result->body;
  return result->status == 200 ? json::parse(result->body) : json();
}

TEST(Endpoints, HealthAndModels) {
  TestServer server;
  httplib::Client client = server.client();
  const httplib::Result health = client.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(json::parse(health->body)["status"], "ok");
  const httplib::Result models = client.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 200);
  const json list = json::parse(models->body);
  EXPECT_EQ(list["object"], "list");
  ASSERT_EQ(list["data"].size(), 1u);
  EXPECT_EQ(list["data"][0]["id"], "testbed");
  EXPECT_EQ(list["data"][0]["object"], "model");
  EXPECT_EQ(list["data"][0]["max_model_len"], 512);
  EXPECT_EQ(served_model_id(server.connection()), "testbed");
}

TEST(Endpoints, ChatCompletionsStreamedAndNot) {
  TestServer server;
  const json messages = json::array({{{"role", "system"}, {"content", "You are terse."}},
                                     {{"role", "user"}, {"content", "Name a Debian tool."}}});
  json body = {{"model", "testbed"}, {"messages", messages}, {"max_tokens", 16},
               {"temperature", 0},   {"ignore_eos", true},   {"stream", true}};
  std::vector<json> chunks;
  const StreamedResponse streamed =
      stream_completion(server.connection(), "/v1/chat/completions", body, [&](const json& chunk) {
        chunks.push_back(chunk);
        return true;
      });
  ASSERT_TRUE(streamed.ok()) << streamed.error;
  EXPECT_EQ(streamed.finish_reason, "length");
  ASSERT_GE(chunks.size(), 2u);
  EXPECT_EQ(chunks.front()["object"], "chat.completion.chunk");
  EXPECT_EQ(chunks.front()["choices"][0]["delta"]["role"], "assistant");
  for (size_t i = 1; i < chunks.size(); ++i)
    EXPECT_FALSE(chunks[i]["choices"][0]["delta"].contains("role")) << i;
  EXPECT_EQ(chunks.back()["choices"][0]["finish_reason"], "length");
  EXPECT_FALSE(streamed.text.empty());

  body["stream"] = false;
  const json reply = post_ok(server, "/v1/chat/completions", body);
  EXPECT_EQ(reply["object"], "chat.completion");
  EXPECT_EQ(reply["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(reply["choices"][0]["message"]["content"], streamed.text);
  EXPECT_EQ(reply["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(reply["usage"]["completion_tokens"], 16);
}

TEST(Endpoints, CompletionsStreamedEqualNotStreamed) {
  TestServer server;
  const StreamedResponse streamed = server.stream("The quick brown fox", 16);
  ASSERT_TRUE(streamed.ok()) << streamed.error;
  EXPECT_GT(streamed.prompt_tokens, 0);
  EXPECT_EQ(streamed.completion_tokens, 16);
  const json reply = post_ok(server, "/v1/completions", unstreamed_body("The quick brown fox", 16));
  EXPECT_EQ(reply["object"], "text_completion");
  EXPECT_EQ(reply["choices"][0]["text"], streamed.text);
  EXPECT_EQ(reply["usage"]["prompt_tokens"], streamed.prompt_tokens);
  EXPECT_EQ(reply["usage"]["completion_tokens"], 16);
}

// Log-probabilities come back where the request asks for them (the engine computes them only
// then): one per completion token, each a log-probability (at most 0).
TEST(Endpoints, LogprobsWhereAsked) {
  TestServer server;
  json body = unstreamed_body("The quick brown fox", 8);
  body["logprobs"] = 0;
  const json values =
      post_ok(server, "/v1/completions", body)["choices"][0]["logprobs"]["token_logprobs"];
  ASSERT_EQ(values.size(), 8u);
  for (const json& value : values) EXPECT_LE(value.get<float>(), 0.0f);
  body.erase("logprobs");
  EXPECT_TRUE(post_ok(server, "/v1/completions", body)["choices"][0]["logprobs"].is_null());

  const json chat = {
      {"model", "testbed"},
      {"messages", json::array({{{"role", "user"}, {"content", "Name a Debian tool."}}})},
      {"max_tokens", 8},
      {"temperature", 0},
      {"ignore_eos", true},
      {"logprobs", true}};
  const json content =
      post_ok(server, "/v1/chat/completions", chat)["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 8u);
  for (const json& entry : content) EXPECT_LE(entry["logprob"].get<float>(), 0.0f);
}

// logprobs N (completions) and top_logprobs N (chat) add the N most likely tokens at each new
// token, most likely first: greedy, the sampled token is the first of them, with the same value.
TEST(Endpoints, TopLogprobsListTheMostLikelyTokens) {
  TestServer server;
  json body = unstreamed_body("The quick brown fox", 6);
  body["logprobs"] = 3;
  const json logprobs = post_ok(server, "/v1/completions", body)["choices"][0]["logprobs"];
  ASSERT_EQ(logprobs["top_logprobs"].size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    const json& top = logprobs["top_logprobs"][i];  // {token text: logprob}; texts may coincide
    ASSERT_TRUE(top.is_object());
    EXPECT_GE(top.size(), 1u);
    EXPECT_LE(top.size(), 3u);
    const std::string token = logprobs["tokens"][i];
    ASSERT_TRUE(top.contains(token)) << top.dump();
    EXPECT_EQ(top[token].get<float>(), logprobs["token_logprobs"][i].get<float>());
    for (const auto& [text, value] : top.items())
      EXPECT_LE(value.get<float>(), top[token].get<float>());
  }

  const json chat = {
      {"model", "testbed"},
      {"messages", json::array({{{"role", "user"}, {"content", "Name a Debian tool."}}})},
      {"max_tokens", 6},
      {"temperature", 0},
      {"ignore_eos", true},
      {"logprobs", true},
      {"top_logprobs", 4}};
  const json content =
      post_ok(server, "/v1/chat/completions", chat)["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 6u);
  for (const json& entry : content) {
    const json& top = entry["top_logprobs"];
    ASSERT_EQ(top.size(), 4u);
    EXPECT_EQ(top[0]["token"], entry["token"]);
    EXPECT_EQ(top[0]["logprob"].get<float>(), entry["logprob"].get<float>());
    for (size_t k = 1; k < 4; ++k)
      EXPECT_LE(top[k]["logprob"].get<float>(), top[k - 1]["logprob"].get<float>());
  }
}

// echo with logprobs scores the prompt (as lm-evaluation-harness asks: echo, logprobs 1, max_tokens
// 0 or 1): its tokens lead the logprobs, the first without a value, each other with its
// log-probability and its most likely tokens; max_tokens 0 gives the same values and no
// completion, and the stream gives what the whole response gives.
TEST(Endpoints, EchoWithLogprobsScoresThePrompt) {
  TestServer server;
  json body = unstreamed_body("The quick brown fox jumps over the lazy dog", 1);
  body["echo"] = true;
  body["logprobs"] = 1;
  const json reply = post_ok(server, "/v1/completions", body);
  const int64_t prompt_tokens = reply["usage"]["prompt_tokens"];
  const json& logprobs = reply["choices"][0]["logprobs"];
  ASSERT_EQ(logprobs["tokens"].size(), size_t(prompt_tokens + 1));
  ASSERT_EQ(logprobs["token_logprobs"].size(), size_t(prompt_tokens + 1));
  ASSERT_EQ(logprobs["top_logprobs"].size(), size_t(prompt_tokens + 1));
  EXPECT_TRUE(logprobs["token_logprobs"][0].is_null());
  EXPECT_TRUE(logprobs["top_logprobs"][0].is_null());
  for (int64_t i = 1; i <= prompt_tokens; ++i) {
    EXPECT_LE(logprobs["token_logprobs"][i].get<float>(), 0.0f) << i;
    ASSERT_EQ(logprobs["top_logprobs"][i].size(), 1u) << i;
    EXPECT_GE(logprobs["top_logprobs"][i].begin()->get<float>(),
              logprobs["token_logprobs"][i].get<float>())
        << i;
  }
  std::string prompt_text;
  for (int64_t i = 0; i < prompt_tokens; ++i)
    prompt_text += logprobs["tokens"][i].get<std::string>();
  EXPECT_EQ(prompt_text, "The quick brown fox jumps over the lazy dog");
  EXPECT_EQ(reply["choices"][0]["text"].get<std::string>().rfind(prompt_text, 0), 0u);

  body["max_tokens"] = 0;
  const json scored = post_ok(server, "/v1/completions", body);
  EXPECT_EQ(scored["usage"]["completion_tokens"], 0);
  EXPECT_EQ(scored["choices"][0]["text"], prompt_text);
  const json& prompt_only = scored["choices"][0]["logprobs"];
  ASSERT_EQ(prompt_only["token_logprobs"].size(), size_t(prompt_tokens));
  for (int64_t i = 0; i < prompt_tokens; ++i) {
    EXPECT_EQ(prompt_only["token_logprobs"][i], logprobs["token_logprobs"][i]) << i;
    EXPECT_EQ(prompt_only["top_logprobs"][i], logprobs["top_logprobs"][i]) << i;
  }

  body["max_tokens"] = 1;
  body["stream"] = true;
  json streamed_tokens = json::array(), streamed_values = json::array();
  const StreamedResponse streamed =
      stream_completion(server.connection(), "/v1/completions", body, [&](const json& chunk) {
        const json& part = chunk["choices"][0]["logprobs"];
        for (const json& token : part["tokens"]) streamed_tokens.push_back(token);
        for (const json& value : part["token_logprobs"]) streamed_values.push_back(value);
        return true;
      });
  ASSERT_TRUE(streamed.ok()) << streamed.error;
  EXPECT_EQ(streamed_tokens, logprobs["tokens"]);
  EXPECT_EQ(streamed_values, logprobs["token_logprobs"]);
}

// A completions request with a list of prompts (strings or token-id lists) gets a choice per
// prompt, index i for prompt i, each what the prompt gets alone; the stream interleaves the
// choices' chunks and ends once, with the usage of all of them.
TEST(Endpoints, ListedPromptsGetAChoiceEach) {
  TestServer server;
  const std::vector<std::string> prompts = {"The quick brown fox", "int main(void) {",
                                            "Debian packages are"};
  std::vector<std::string> alone;
  int64_t prompt_tokens = 0;
  for (const std::string& prompt : prompts) {
    const json reply = post_ok(server, "/v1/completions", unstreamed_body(prompt, 6));
    alone.push_back(reply["choices"][0]["text"]);
    prompt_tokens += reply["usage"]["prompt_tokens"].get<int64_t>();
  }
  json body = unstreamed_body("", 6);
  body["prompt"] = prompts;
  const json reply = post_ok(server, "/v1/completions", body);
  ASSERT_EQ(reply["choices"].size(), prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(reply["choices"][i]["index"], i);
    EXPECT_EQ(reply["choices"][i]["text"], alone[i]) << prompts[i];
  }
  EXPECT_EQ(reply["usage"]["prompt_tokens"], prompt_tokens);
  EXPECT_EQ(reply["usage"]["completion_tokens"], 6 * int64_t(prompts.size()));

  // The same as token ids, streamed.
  const Tokenizer tokenizer = Tokenizer::load(testbed_model_dir());
  json ids = json::array();
  for (const std::string& prompt : prompts) ids.push_back(tokenizer.encode(prompt));
  body = greedy_body("", 6);
  body["prompt"] = ids;
  std::vector<std::string> streamed(prompts.size());
  std::vector<int> finishes(prompts.size(), 0);
  int usage_chunks = 0;
  const StreamedResponse result =
      stream_completion(server.connection(), "/v1/completions", body, [&](const json& chunk) {
        if (chunk.contains("usage") && chunk["usage"].is_object()) {
          ++usage_chunks;
          EXPECT_EQ(chunk["usage"]["completion_tokens"], 6 * int64_t(prompts.size()));
        }
        for (const json& choice : chunk["choices"]) {
          const size_t i = choice["index"];
          EXPECT_LT(i, prompts.size());
          if (i >= prompts.size()) continue;
          streamed[i] += choice["text"].get<std::string>();
          if (!choice["finish_reason"].is_null()) ++finishes[i];
        }
        return true;
      });
  ASSERT_TRUE(result.ok()) << result.error;
  EXPECT_EQ(streamed, alone);
  EXPECT_EQ(finishes, std::vector<int>(prompts.size(), 1));
  EXPECT_EQ(usage_chunks, 1);
  EXPECT_EQ(server.idle_snapshot().full_pages_used, 0);
}

// /tokenize and /detokenize (vLLM's): the engine's token ids of a prompt or of a chat, and back.
TEST(Endpoints, TokenizeAndDetokenize) {
  TestServer server;
  const Tokenizer tokenizer = Tokenizer::load(testbed_model_dir());
  const json tokens =
      post_ok(server, "/tokenize", {{"model", "testbed"}, {"prompt", "The quick brown fox"}});
  EXPECT_EQ(tokens["tokens"], tokenizer.encode("The quick brown fox"));
  EXPECT_EQ(tokens["count"], tokens["tokens"].size());
  EXPECT_EQ(tokens["max_model_len"], 512);
  EXPECT_EQ(post_ok(server, "/detokenize", {{"tokens", tokens["tokens"]}})["prompt"],
            "The quick brown fox");
  // A chat counts what the chat endpoint would feed the model: the formatted turn, longer than its
  // text.
  const json chat = post_ok(server, "/tokenize",
                            {{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}});
  EXPECT_GT(chat["count"].get<size_t>(), tokenizer.encode("hi").size());
  const httplib::Result bad =
      server.client().Post("/detokenize", R"({"tokens": [-1]})", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(json::parse(bad->body)["error"]["param"], "tokens");
}

// n choices of one prompt: at a seed, choice j draws with seed + j, so a request is repeatable and
// its choices differ; greedy, they agree. Chat takes n too, and a list of prompts gets n each.
TEST(Endpoints, NChoicesAPrompt) {
  TestServer server;
  json body = unstreamed_body("The quick brown fox", 12);
  body["temperature"] = 1.0;
  body["seed"] = 7;
  body["n"] = 3;
  const json first = post_ok(server, "/v1/completions", body);
  const json again = post_ok(server, "/v1/completions", body);
  ASSERT_EQ(first["choices"].size(), 3u);
  std::set<std::string> texts;
  for (size_t j = 0; j < 3; ++j) {
    EXPECT_EQ(first["choices"][j]["index"], j);
    EXPECT_EQ(first["choices"][j]["text"], again["choices"][j]["text"]) << j;
    texts.insert(first["choices"][j]["text"].get<std::string>());
  }
  EXPECT_EQ(texts.size(), 3u);
  EXPECT_EQ(first["usage"]["completion_tokens"], 36);
  // Choice 1 is what the prompt alone gives at seed 8.
  json single = body;
  single["n"] = 1;
  single["seed"] = 8;
  EXPECT_EQ(post_ok(server, "/v1/completions", single)["choices"][0]["text"],
            first["choices"][1]["text"]);

  body["temperature"] = 0;
  body["prompt"] = {"The quick brown fox", "int main(void) {"};
  body["n"] = 2;
  const json greedy = post_ok(server, "/v1/completions", body);
  ASSERT_EQ(greedy["choices"].size(), 4u);
  EXPECT_EQ(greedy["choices"][0]["text"], greedy["choices"][1]["text"]);
  EXPECT_EQ(greedy["choices"][2]["text"], greedy["choices"][3]["text"]);
  EXPECT_NE(greedy["choices"][0]["text"], greedy["choices"][2]["text"]);

  const json chat = {
      {"model", "testbed"},
      {"messages", json::array({{{"role", "user"}, {"content", "Name a Debian tool."}}})},
      {"max_tokens", 8},
      {"temperature", 1.0},
      {"seed", 3},
      {"n", 2}};
  const json chat_reply = post_ok(server, "/v1/chat/completions", chat);
  ASSERT_EQ(chat_reply["choices"].size(), 2u);
  EXPECT_EQ(chat_reply["choices"][1]["index"], 1);
  EXPECT_EQ(chat_reply["choices"][1]["message"]["role"], "assistant");
}

// What lm-evaluation-harness's local-completions model sends for loglikelihood requests (token-id
// prompts, a batch of them, echo, logprobs 1, max_tokens 1) and reads back: per choice, sorted by
// index, the continuation's log-probabilities token_logprobs[ctxlen:-1] and whether each is the
// most likely (its value is the largest of its top_logprobs). Here a continuation that greedy
// decoding produced is greedy at every token, and its log-probabilities are those the generation
// reported.
TEST(Endpoints, LmEvalLoglikelihoodRequests) {
  TestServer server;
  const Tokenizer tokenizer = Tokenizer::load(testbed_model_dir());
  json generate = unstreamed_body("The quick brown fox", 4);
  generate["logprobs"] = 0;
  const json generated = post_ok(server, "/v1/completions", generate)["choices"][0]["logprobs"];
  const std::vector<int32_t> context = tokenizer.encode("The quick brown fox");
  std::vector<int32_t> whole = context;
  for (const json& token : generated["tokens"]) {
    int32_t id = -1;
    for (int32_t t = 0; t < tokenizer.vocab_size() && id < 0; ++t) {
      if (tokenizer.token_bytes(t) == token.get<std::string>()) id = t;
    }
    ASSERT_GE(id, 0);
    whole.push_back(id);
  }
  const std::vector<int32_t> other = tokenizer.encode("int main(void) { return 0; }");
  const json request = {{"model", "testbed"}, {"prompt", {whole, other}},
                        {"temperature", 0},   {"max_tokens", 1},
                        {"logprobs", 1},      {"seed", 1234},
                        {"echo", true}};
  const json reply = post_ok(server, "/v1/completions", request);
  ASSERT_EQ(reply["choices"].size(), 2u);
  for (const json& choice : reply["choices"]) {
    const size_t tokens = choice["index"] == 0 ? whole.size() : other.size();
    ASSERT_EQ(choice["logprobs"]["token_logprobs"].size(), tokens + 1);
    ASSERT_EQ(choice["logprobs"]["top_logprobs"].size(), tokens + 1);
  }
  const json& scored = reply["choices"][reply["choices"][0]["index"] == 0 ? 0 : 1]["logprobs"];
  const size_t ctxlen = context.size();
  for (size_t i = ctxlen; i + 1 < scored["token_logprobs"].size(); ++i) {
    const float value = scored["token_logprobs"][i];
    float best = -INFINITY;
    for (const auto& [text, top] : scored["top_logprobs"][i].items())
      best = std::max(best, top.get<float>());
    EXPECT_EQ(value, best) << "token " << i;
    EXPECT_NEAR(value, generated["token_logprobs"][i - ctxlen].get<float>(), 1e-3f)
        << "token " << i;
  }
}

// logit_bias: +100 on one token makes greedy decoding emit only it; -100 on the token greedy
// picks first makes it pick another.
TEST(Endpoints, LogitBiasSteersTheTokens) {
  TestServer server;
  const Tokenizer tokenizer = Tokenizer::load(testbed_model_dir());
  json body = unstreamed_body("The quick brown fox", 5);
  body["logprobs"] = 0;
  auto tokens_of = [&](const json& request) {
    return post_ok(server, "/v1/completions", request)["choices"][0]["logprobs"]["tokens"];
  };
  const json plain = tokens_of(body);
  ASSERT_EQ(plain.size(), 5u);

  const int32_t forced_id = tokenizer.encode(" Debian").front();
  body["logit_bias"] = {{std::to_string(forced_id), 100}};
  const json forced = tokens_of(body);
  ASSERT_EQ(forced.size(), 5u);
  for (const json& token : forced) EXPECT_EQ(token, tokenizer.token_bytes(forced_id));

  int32_t first_id = -1;
  for (int32_t id = 0; id < tokenizer.vocab_size() && first_id < 0; ++id) {
    if (tokenizer.token_bytes(id) == plain[0].get<std::string>()) first_id = id;
  }
  ASSERT_GE(first_id, 0);
  body["logit_bias"] = {{std::to_string(first_id), -100}};
  const json avoided = tokens_of(body);
  ASSERT_EQ(avoided.size(), 5u);
  EXPECT_NE(avoided[0], plain[0]);
}

// vLLM's stop_token_ids and min_tokens, and OpenAI's frequency and presence penalties.
TEST(Endpoints, StopTokenIdsMinTokensAndPenalties) {
  TestServer server;
  const Tokenizer tokenizer = Tokenizer::load(testbed_model_dir());
  json body = unstreamed_body("The quick brown fox", 8);
  body["logprobs"] = 0;
  auto choice_of = [&](const json& request) {
    return post_ok(server, "/v1/completions", request)["choices"][0];
  };
  const json plain = choice_of(body)["logprobs"]["tokens"];
  ASSERT_EQ(plain.size(), 8u);
  ASSERT_TRUE(plain[2] != plain[0] && plain[2] != plain[1]);
  int32_t third = -1;
  for (int32_t id = 0; id < tokenizer.vocab_size() && third < 0; ++id) {
    if (tokenizer.token_bytes(id) == plain[2].get<std::string>()) third = id;
  }
  ASSERT_GE(third, 0);

  body["stop_token_ids"] = {third};
  const json stopped = choice_of(body);
  EXPECT_EQ(stopped["finish_reason"], "stop");
  EXPECT_EQ(stopped["text"], plain[0].get<std::string>() + plain[1].get<std::string>());

  body["min_tokens"] = 3;
  const json held = choice_of(body)["logprobs"]["tokens"];
  ASSERT_GE(held.size(), 3u);
  EXPECT_EQ(held[1], plain[1]);
  EXPECT_NE(held[2], plain[2]);  // the stop token may not come third

  json longer = unstreamed_body("The quick brown fox", 24);
  longer["logprobs"] = 0;
  const json repeating = choice_of(longer)["logprobs"]["tokens"];
  longer["frequency_penalty"] = 2;
  longer["presence_penalty"] = 2;
  const json penalized = choice_of(longer)["logprobs"]["tokens"];
  ASSERT_EQ(penalized.size(), 24u);
  auto distinct = [](const json& tokens) {
    return std::set<std::string>(tokens.begin(), tokens.end()).size();
  };
  ASSERT_LT(distinct(repeating), 24u);  // the plain continuation repeats tokens
  EXPECT_GT(distinct(penalized), distinct(repeating));
}

// JSON mode (response_format json_object, which vLLM takes for completions too): the text is one
// JSON object, the choice ending with reason stop when it closes; streamed, the deltas add up to
// the same object. (The testbed is no chat model: in a chat it writes prose into a key.)
TEST(Endpoints, JsonObjectResponseFormat) {
  TestServer server;
  json body = unstreamed_body("The quick brown fox", 64);
  body["response_format"] = {{"type", "json_object"}};
  const json choice = post_ok(server, "/v1/completions", body)["choices"][0];
  ASSERT_EQ(choice["finish_reason"], "stop") << choice.dump();
  const std::string text = choice["text"];
  ASSERT_TRUE(json::accept(text)) << text;
  EXPECT_TRUE(json::parse(text).is_object()) << text;

  body["stream"] = true;
  const StreamedResponse streamed = stream_completion(server.connection(), "/v1/completions", body,
                                                      [](const json&) { return true; });
  ASSERT_TRUE(streamed.ok()) << streamed.error;
  EXPECT_EQ(streamed.finish_reason, "stop");
  EXPECT_EQ(streamed.text, text);

  body["stream"] = false;
  body["response_format"] = {{"type", "text"}};
  const json free_text = post_ok(server, "/v1/completions", body)["choices"][0];
  EXPECT_FALSE(
      json::accept(free_text["text"].get<std::string>()));  // the testbed writes no JSON unasked
}

// vLLM's include_stop_str_in_output (the stop string stays in the text) and skip_special_tokens
// (false: a special token's text is shown; the end-of-text token forced here by logit_bias).
TEST(Endpoints, StopStringKeptAndSpecialTokensShown) {
  TestServer server;
  const Tokenizer tokenizer = Tokenizer::load(testbed_model_dir());
  json body = unstreamed_body("The quick brown fox", 16);
  body["stop"] = "sixth";
  const json cut = post_ok(server, "/v1/completions", body)["choices"][0];
  ASSERT_EQ(cut["finish_reason"], "stop");
  body["include_stop_str_in_output"] = true;
  const json kept = post_ok(server, "/v1/completions", body)["choices"][0];
  EXPECT_EQ(kept["finish_reason"], "stop");
  EXPECT_EQ(kept["text"], cut["text"].get<std::string>() + "sixth");

  int32_t special = -1;
  for (int32_t id = 0; id < tokenizer.vocab_size() && special < 0; ++id) {
    if (tokenizer.is_special(id)) special = id;
  }
  ASSERT_GE(special, 0);
  json forced =
      unstreamed_body("The quick brown fox", 2);  // ignore_eos: the special token does not stop it
  forced["logit_bias"] = {{std::to_string(special), 100}};
  EXPECT_EQ(post_ok(server, "/v1/completions", forced)["choices"][0]["text"], "");
  forced["skip_special_tokens"] = false;
  EXPECT_EQ(post_ok(server, "/v1/completions", forced)["choices"][0]["text"],
            tokenizer.token_bytes(special) + tokenizer.token_bytes(special));
}

// vLLM's truncate_prompt_tokens: a prompt longer than the context keeps its last k tokens, and
// is answered as that shorter prompt alone is (-1: the model's context, which leaves no room here).
TEST(Endpoints, TruncatePromptTokensKeepsTheLastTokens) {
  TestServer server;
  const Tokenizer tokenizer = Tokenizer::load(testbed_model_dir());
  std::string long_prompt;
  for (int i = 0; i < 600; ++i) long_prompt += "word ";
  const std::vector<int32_t> ids = tokenizer.encode(long_prompt);
  ASSERT_GT(ids.size(), 512u);  // past the testbed's context
  json body = unstreamed_body(long_prompt, 4);
  body["truncate_prompt_tokens"] = 100;
  const json truncated = post_ok(server, "/v1/completions", body);
  EXPECT_EQ(truncated["usage"]["prompt_tokens"], 100);
  json tail = unstreamed_body("", 4);
  tail["prompt"] = std::vector<int32_t>(ids.end() - 100, ids.end());
  EXPECT_EQ(truncated["choices"][0]["text"],
            post_ok(server, "/v1/completions", tail)["choices"][0]["text"]);
  body["truncate_prompt_tokens"] = -1;
  const httplib::Result full =
      server.client().Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(full);
  EXPECT_EQ(full->status, 400);  // the whole context for the prompt leaves none for the answer
}

}  // namespace
}  // namespace oscar::testing
