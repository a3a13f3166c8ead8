// Chat requests rendered with a checkpoint's template (Qwen3's, from models/reference-chat):
// the fields vLLM takes for it, /tokenize with messages, and the answers read back from the
// model's text into reasoning_content and tool_calls, streamed and whole.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/openai_response.h"
#include "support/test_paths.h"
#include "tokenizer/tokenizer.h"

namespace oscar::testing {
namespace {

using nlohmann::json;

const Tokenizer& testbed_tokenizer() {
  static const Tokenizer tokenizer = Tokenizer::load(testbed_model_dir());
  return tokenizer;
}

ServedModel served_with(const std::string& template_folder) {
  ServedModel model =
      make_served_model("testbed", testbed_tokenizer(), "Qwen3ForCausalLM", {0}, 4096);
  use_chat_template(
      model, ChatTemplate::load(source_dir() + "/models/reference-chat/" + template_folder, ""));
  return model;
}

std::string prompt_text(const std::string& body, const ServedModel& model) {
  const ApiRequest request = parse_api_request(body, Endpoint::chat_completions, model);
  return testbed_tokenizer().decode(request.prompts.at(0));
}

const char* kWeatherTool =
    R"({"type": "function", "function": {"name": "get_weather", "description": "d",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}})";

TEST(ChatRequest, RendersWithTheFieldsVllmTakes) {
  const ServedModel qwen = served_with("qwen3");
  EXPECT_TRUE(qwen.split_reasoning);
  const std::string user = R"([{"role": "user", "content": "Hi"}])";
  EXPECT_EQ(prompt_text(R"({"messages": )" + user + "}", qwen),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(prompt_text(R"({"messages": )" + user +
                            R"(, "chat_template_kwargs": {"enable_thinking": false}})",
                        qwen),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  EXPECT_EQ(prompt_text(R"({"messages": )" + user + R"(, "add_generation_prompt": false})", qwen),
            "<|im_start|>user\nHi<|im_end|>\n");
  EXPECT_EQ(
      prompt_text(R"({"messages": [{"role": "user", "content": "Hi"},
                                         {"role": "assistant", "content": "Hello th"}],
                            "continue_final_message": true})",
                  qwen),
      "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHello th");
  // Tools (their schema's key order kept), a named tool_choice, and a tool call and its result.
  const std::string with_tools = prompt_text(std::string(R"({"messages": [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"}],
      "tools": [)") + kWeatherTool + R"(, {"type": "function", "function": {"name": "other"}}],
      "tool_choice": {"type": "function", "function": {"name": "get_weather"}}})",
                                             qwen);
  EXPECT_NE(with_tools.find(
                R"({"type": "function", "function": {"name": "get_weather", "description": "d", )"
                R"("parameters": {"type": "object", "properties": {"city": {"type": "string"}}, )"
                R"("required": ["city"]}}})"),
            std::string::npos)
      << with_tools;
  EXPECT_EQ(with_tools.find("other"), std::string::npos);
  EXPECT_NE(with_tools.find(
                "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                "\"Paris\"}}\n</tool_call>"
                "<|im_end|>\n<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>"),
            std::string::npos)
      << with_tools;
}

TEST(ChatRequest, TokenizeRendersAsChatDoes) {
  const ServedModel qwen = served_with("qwen3-thinking");
  const std::string body =
      R"({"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]})";
  const json tokens = tokenize_response(body, qwen);
  const ApiRequest request = parse_api_request(body, Endpoint::chat_completions, qwen);
  EXPECT_EQ(tokens["tokens"].get<std::vector<int32_t>>(), request.prompts.at(0));
  EXPECT_TRUE(request.chat_output.starts_in_reasoning);  // the thinking template opens <think>
}

TEST(ChatRequest, BadChatFieldsNameTheField) {
  const ServedModel qwen = served_with("qwen3");
  const ServedModel builtin =
      make_served_model("testbed", testbed_tokenizer(), "Qwen3ForCausalLM", {0}, 4096);
  const std::string user = R"("messages": [{"role": "user", "content": "Hi"}])";
  const std::tuple<std::string, const ServedModel*, std::string> cases[] = {
      {"{" + user + R"(, "chat_template_kwargs": [1]})", &qwen, "chat_template_kwargs"},
      {"{" + user + R"(, "add_generation_prompt": "yes"})", &qwen, "add_generation_prompt"},
      {"{" + user + R"(, "continue_final_message": true, "add_generation_prompt": true})", &qwen,
       "continue_final_message"},
      {"{" + user + R"(, "tools": [{"type": "function"}]})", &qwen, "tools"},
      {"{" + user + R"(, "tools": [)" + kWeatherTool + R"(], "tool_choice": "required"})", &qwen,
       "tool_choice"},
      {"{" + user + R"(, "tools": [)" + kWeatherTool +
           R"(], "tool_choice": {"type": "function", "function": {"name": "x"}}})",
       &qwen, "tool_choice"},
      {"{" + user + R"(, "tool_choice": "auto"})", &qwen, "tool_choice"},
      {"{" + user + R"(, "chat_template": "{{ 1 }}"})", &qwen, "chat_template"},
      {"{" + user + R"(, "tools": [)" + kWeatherTool + "]}", &builtin, "tools"},
      {R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{oops"}}]}]})",
       &qwen, "messages"},
      {R"({"messages": [{"role": "robot", "content": "x"}]})", &qwen, "messages"},
      {"{" + user + R"(, "chat_template_kwargs": {"x": )" + std::string(100, '[') +
           std::string(100, ']') + "}}",
       &qwen, "chat_template_kwargs"},
      {R"({"messages": [{"role": "tool", "content": "x"}]})", &builtin, "messages"},
      {R"({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}],
           "continue_final_message": true, "add_generation_prompt": false, "chat_template_kwargs": {"x": 1}})",
       &builtin, ""},
  };
  for (const auto& [body, model, param] : cases) {
    if (param.empty()) {
      EXPECT_NO_THROW(parse_api_request(body, Endpoint::chat_completions, *model)) << body;
      continue;
    }
    try {
      parse_api_request(body, Endpoint::chat_completions, *model);
      ADD_FAILURE() << body << " was accepted";
    } catch (const ApiError& error) {
      EXPECT_EQ(error.status(), 400) << body;
      EXPECT_EQ(error.param(), param) << body << ": " << error.what();
    }
  }
}

TEST(ChatRequest, TemplateRefusalsAreBadRequestsQuotingTheTemplate) {
  const ServedModel llama = served_with("llama-3.1");
  const std::string body =
      R"({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [
      {"function": {"name": "a", "arguments": {}}}, {"function": {"name": "b", "arguments": {}}}]}],
      "add_generation_prompt": false})";
  try {
    parse_api_request(body, Endpoint::chat_completions, llama);
    ADD_FAILURE() << "accepted";
  } catch (const ApiError& error) {
    EXPECT_EQ(error.param(), "messages");
    EXPECT_NE(std::string(error.what())
                  .find("template line 71: This model only supports single tool-calls"),
              std::string::npos)
        << error.what();
  }
}

RequestOutput text_output(std::string text, bool finished = false) {
  RequestOutput output;
  output.text = std::move(text);
  output.finished = finished;
  if (finished) output.finish_reason = FinishReason::stop;
  return output;
}

TEST(ChatRequest, AnswersCarryReasoningAndToolCalls) {
  const ServedModel qwen = served_with("qwen3");
  const ApiRequest request = parse_api_request(
      std::string(R"({"messages": [{"role": "user", "content": "Weather?"}], "tools": [)") +
          kWeatherTool + "]}",
      Endpoint::chat_completions, qwen);
  EXPECT_TRUE(request.chat_output.split_reasoning && request.chat_output.parse_tool_calls);
  const std::vector<std::string> pieces = {
      "<thi",
      "nk>\nPar",
      "is?\n</think>\n\n",
      "<tool_call>\n{\"name\": \"get_w",
      "eather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool",
      "_call>"};
  ResponseBuilder streamed(request, qwen);
  std::string reasoning, content;
  json calls = json::array();
  json last;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const auto chunk = streamed.chunk(text_output(pieces[i], i + 1 == pieces.size()));
    if (!chunk) continue;
    last = *chunk;
    const json& delta = (*chunk)["choices"][0]["delta"];
    reasoning += delta.value("reasoning_content", "");
    content += delta.value("content", "");
    for (const json& call : delta.value("tool_calls", json::array())) calls.push_back(call);
  }
  EXPECT_EQ(reasoning, "\nParis?\n");
  EXPECT_EQ(content, "\n\n");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0]["index"], 0);
  EXPECT_EQ(calls[0]["type"], "function");
  EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(calls[0]["function"]["arguments"], R"({"city":"Paris"})");
  EXPECT_EQ(last["choices"][0]["finish_reason"], "tool_calls");

  ResponseBuilder whole(request, qwen);
  for (size_t i = 0; i < pieces.size(); ++i)
    whole.add(text_output(pieces[i], i + 1 == pieces.size()));
  const json message = ResponseBuilder::response({whole})["choices"][0]["message"];
  EXPECT_EQ(message["reasoning_content"], "\nParis?\n");
  EXPECT_EQ(message["content"], "\n\n");
  EXPECT_EQ(message["tool_calls"][0]["function"]["arguments"], R"({"city":"Paris"})");
  EXPECT_EQ(ResponseBuilder::response({whole})["choices"][0]["finish_reason"], "tool_calls");
}

}  // namespace
}  // namespace oscar::testing
