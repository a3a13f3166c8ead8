// A Mistral-style checkpoint served over HTTP: a MistralForCausalLM model with random weights, a
// SentencePiece tokenizer.json with Mistral v0.3's control tokens, and tokenizer_config.json with
// the real chat template, or without one (the built-in layout). /tokenize and chat completions
// must give the tokens of the template's renderings in models/reference-chat/renderings.json.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "server/background_server.h"
#include "support/test_paths.h"
#include "tokenizer/tokenizer.h"
#include "util/file_io.h"
#include "util/xz.h"

namespace oscar::testing {
namespace {

using json = nlohmann::ordered_json;  // tools keep their key order, as the template writes them

constexpr int32_t kBos = 1, kEos = 2;
// Mistral v0.3's control tokens, given ids past the Llama 2 vocabulary the tokenizer reuses.
constexpr const char* kControlTokens[] = {
    "[INST]",         "[/INST]",        "[TOOL_CALLS]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]",
    "[TOOL_RESULTS]", "[/TOOL_RESULTS]"};
constexpr int32_t kInstId = 32000;
constexpr int64_t kMaxModelLen = 4096;

std::string reference_chat(const std::string& name) {
  return source_dir() + "/models/reference-chat/" + name;
}

// A checkpoint directory: Llama 2's tokenizer.json in the Metaspace style Mistral v0.3 exports,
// plus the control tokens; tokenizer_config.json with Mistral's BOS and EOS, and the chat
// template when `with_template`.
std::string write_checkpoint(const std::string& label, bool with_template) {
  const std::string dir = make_temp_dir(label);
  const std::string xz_path = reference_chat("llama-2-metaspace-tokenizer.json.xz");
  json tokenizer = json::parse(decompress_xz(read_file(xz_path), xz_path));
  int32_t id = kInstId;
  for (const char* content : kControlTokens) {
    tokenizer["added_tokens"].push_back({{"id", id++},
                                         {"content", content},
                                         {"single_word", false},
                                         {"lstrip", false},
                                         {"rstrip", false},
                                         {"normalized", false},
                                         {"special", true}});
  }
  write_file_atomically(dir + "/tokenizer.json", tokenizer.dump());
  json config = {{"add_bos_token", true}, {"bos_token", "<s>"}, {"eos_token", "</s>"}};
  if (with_template)
    config["chat_template"] = read_file(reference_chat("mistral-v0.3/chat_template.jinja"));
  write_file_atomically(dir + "/tokenizer_config.json", config.dump());
  return dir;
}

// Mistral-7B-v0.3's family and block at a size that serves in a moment; its vocabulary.
const ModelWeights& tiny_mistral() {
  static const ModelWeights weights = [] {
    ModelConfig config =
        load_model_config(source_dir() + "/models/hf-configs/mistral-7b-v0.3.json");
    config.num_layers = 1;
    config.hidden_size = 64;
    config.num_heads = 2;
    config.num_kv_heads = 1;
    config.head_dim = 32;
    config.intermediate_size = 128;
    return make_random_model(config, 7);
  }();
  return weights;
}

// The checkpoint served as `oscar serve` serves it: the chat template loaded from its directory.
class MistralServer {
 public:
  MistralServer(const std::string& label, bool with_template)
      : dir_(write_checkpoint(label, with_template)), tokenizer_(Tokenizer::load(dir_)) {
    BackendOptions backend;
    backend.kv.dtype = KvDtype::f32;
    backend.capacity = {256, 0};
    EngineOptions engine;
    engine.scheduler.max_num_seqs = 4;
    engine.scheduler.prefill_chunk_tokens = 512;
    engine.scheduler.max_step_tokens = 512;
    engine.max_model_len = kMaxModelLen;
    ServedModel served =
        make_served_model("mistral", tokenizer_, "MistralForCausalLM", {kEos}, kMaxModelLen);
    use_chat_template(served, ChatTemplate::load(dir_, "MistralForCausalLM"));
    description_ = served.chat_template.description();
    HttpServerOptions http;
    http.port = 0;
    server_ = std::make_unique<BackgroundServer>(
        std::make_unique<Engine>(make_backend(tiny_mistral(), backend), &tokenizer_, engine),
        std::move(served), http);
  }

  const Tokenizer& tokenizer() const { return tokenizer_; }
  const std::string& template_description() const { return description_; }

  httplib::Result post(const std::string& path, const json& body) const {
    httplib::Client client(server_->url());
    client.set_read_timeout(60, 0);
    return client.Post(path, body.dump(), "application/json");
  }

  json post_ok(const std::string& path, const json& body) const {
    const httplib::Result result = post(path, body);
    EXPECT_TRUE(result) << path;
    if (!result) return json();
    EXPECT_EQ(result->status, 200) << result->body;
    return result->status == 200 ? json::parse(result->body) : json();
  }

 private:
  std::string dir_;
  Tokenizer tokenizer_;
  std::string description_;
  std::unique_ptr<BackgroundServer> server_;
};

// Whether the server passes the case's messages to the template unchanged: it takes OpenAI's
// roles only, and parses tool call arguments given as text into objects, as vLLM does.
bool served_unchanged(const json& c) {
  for (const json& message : c["messages"]) {
    if (message["role"] == "tool_results") return false;
    for (const json& call : message.value("tool_calls", json::array()))
      if (call["function"]["arguments"].is_string()) return false;
  }
  return true;
}

// The reference's Mistral renderings with a generation prompt; `with_tools`: those with tools too.
std::vector<json> reference_cases(bool with_tools) {
  const json root = json::parse(read_file(reference_chat("renderings.json")));
  std::vector<json> out;
  for (const json& c : root["cases"]) {
    if (c["template"] != "mistral-v0.3" || !c["add_generation_prompt"].get<bool>()) continue;
    if (c.contains("error") || (!with_tools && !c["tools"].is_null())) continue;
    if (served_unchanged(c)) out.push_back(c);
  }
  return out;
}

json chat_body(const json& c) {
  json body = {{"model", "mistral"}, {"messages", c["messages"]}};
  if (!c["tools"].is_null()) body["tools"] = c["tools"];
  return body;
}

// The template writes <s> and </s>; the built-in layout leaves <s> to the tokenizer's
// post-processor. Both must come to the ids of the reference text, [INST] a single token.
void expect_reference_tokens(const MistralServer& server, bool with_tools) {
  const std::vector<json> cases = reference_cases(with_tools);
  ASSERT_EQ(cases.size(), with_tools ? 14u : 11u);
  for (const json& c : cases) {
    const std::string rendered = c["rendered"];
    const std::vector<int32_t> expected =
        server.tokenizer().encode(rendered, /*add_special_tokens=*/false);
    ASSERT_GE(expected.size(), 1u);
    EXPECT_EQ(expected[0], kBos) << c["name"];
    EXPECT_EQ(std::count(expected.begin(), expected.end(), kBos), 1) << c["name"];
    if (rendered != "<s>") {
      EXPECT_NE(std::find(expected.begin(), expected.end(), kInstId), expected.end()) << c["name"];
    }
    const json tokens = server.post_ok("/tokenize", chat_body(c));
    EXPECT_EQ(tokens["tokens"].get<std::vector<int32_t>>(), expected)
        << server.template_description() << ": " << c["name"];
  }
  // A chat completion runs such a prompt through the model.
  const json& multi_turn = cases[2];
  ASSERT_EQ(multi_turn["name"], "multi-turn");
  json body = chat_body(multi_turn);
  body["max_tokens"] = 2;
  body["temperature"] = 0;
  const json reply = server.post_ok("/v1/chat/completions", body);
  EXPECT_EQ(reply["usage"]["prompt_tokens"],
            server.tokenizer().encode(multi_turn["rendered"].get<std::string>(), false).size());
  EXPECT_LE(reply["usage"]["completion_tokens"].get<int64_t>(), 2);
}

void expect_alternation_refused(const MistralServer& server) {
  const httplib::Result result = server.post(
      "/v1/chat/completions",
      {{"messages", {{{"role", "user"}, {"content", "a"}}, {{"role", "user"}, {"content", "b"}}}}});
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 400);
  const json error = json::parse(result->body)["error"];
  EXPECT_EQ(error["param"], "messages");
  EXPECT_NE(error["message"].get<std::string>().find("must alternate user/assistant"),
            std::string::npos)
      << error.dump();
}

TEST(MistralChat, CheckpointTemplateGivesTheReferenceTokens) {
  const MistralServer server("mistral-chat-template", /*with_template=*/true);
  EXPECT_NE(server.template_description().find("tokenizer_config.json"), std::string::npos);
  expect_reference_tokens(server, /*with_tools=*/true);
  expect_alternation_refused(server);
}

TEST(MistralChat, BuiltInLayoutGivesTheSameTokensWithoutATemplate) {
  const MistralServer server("mistral-chat-builtin", /*with_template=*/false);
  EXPECT_EQ(server.template_description(), "built-in Mistral");
  expect_reference_tokens(server, /*with_tools=*/false);
  expect_alternation_refused(server);
}

}  // namespace
}  // namespace oscar::testing
