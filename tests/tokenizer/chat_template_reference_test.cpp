// Checkpoint chat templates (Qwen3, Qwen3 thinking, Llama 3.1, Llama 3, Mistral v0.3) rendered by
// oscar against the renderings of Hugging Face's @huggingface/jinja (models/reference-chat, made by
// tools/chat_reference/make_reference.mjs), byte for byte.
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "support/test_paths.h"
#include "tokenizer/chat_template.h"
#include "util/error.h"
#include "util/file_io.h"

namespace oscar {
namespace {

using nlohmann::ordered_json;

std::string reference_dir() {
  return testing::source_dir() + "/models/reference-chat";
}

const ChatTemplate& template_named(const std::string& name) {
  static std::map<std::string, ChatTemplate> loaded;
  auto it = loaded.find(name);
  if (it == loaded.end())
    it = loaded.emplace(name, ChatTemplate::load(reference_dir() + "/" + name, "")).first;
  return it->second;
}

// The text of a template folder's files, to tell the template's own messages from others.
std::string template_files_text(const std::string& name) {
  std::string text;
  for (const char* file : {"/chat_template.jinja", "/tokenizer_config.json"}) {
    const std::string path = reference_dir() + "/" + name + file;
    if (std::filesystem::exists(path)) text += read_file(path);
  }
  return text;
}

TEST(ChatTemplateReference, RendersEveryCaseAsHuggingFaceDoes) {
  const ordered_json root = ordered_json::parse(read_file(reference_dir() + "/renderings.json"));
  size_t matched = 0, refused = 0;
  std::map<std::string, size_t> per_template;
  for (const ordered_json& c : root["cases"]) {
    const std::string label =
        c["template"].get<std::string>() + ": " + c["name"].get<std::string>() +
        (c["add_generation_prompt"].get<bool>() ? " (generation prompt)" : "");
    ChatRenderOptions options;
    options.tools = c["tools"];
    options.template_kwargs = c["chat_template_kwargs"];
    options.add_generation_prompt = c["add_generation_prompt"];
    options.continue_final_message = c["continue_final_message"];
    const ChatTemplate& chat = template_named(c["template"]);
    EXPECT_TRUE(chat.writes_special_tokens()) << label;
    if (c.contains("error")) {
      // A template's raise_exception gives the reference's message; other refusals (null
      // content) are worded by each renderer.
      try {
        chat.render(c["messages"], options);
        ADD_FAILURE() << label << ": rendered";
      } catch (const Error& error) {
        const std::string expected = c["error"];
        if (template_files_text(c["template"]).find(expected) != std::string::npos) {
          EXPECT_NE(std::string(error.what()).find(expected), std::string::npos)
              << label << ": " << error.what();
        }
      }
      ++refused;
      continue;
    }
    try {
      const std::string rendered = chat.render(c["messages"], options);
      EXPECT_EQ(rendered, c["rendered"].get<std::string>()) << label;
      if (rendered == c["rendered"].get<std::string>()) {
        ++matched;
        ++per_template[c["template"]];
      }
    } catch (const Error& error) {
      ADD_FAILURE() << label << ": " << error.what();
    }
  }
  EXPECT_EQ(matched + refused, root["cases"].size());
  EXPECT_EQ(per_template.size(), 5u);
  std::printf("%zu of %zu renderings byte-identical, %zu refused as the reference refuses\n",
              matched, root["cases"].size(), refused);
}

// The built-in Mistral layout (for checkpoints without a template) against the real template's
// renderings of every case without tools: the same text but the <s> the tokenizer adds, and the
// same refusals.
TEST(ChatTemplateReference, BuiltInMistralLayoutRendersAsTheTemplateDoes) {
  const ordered_json root = ordered_json::parse(read_file(reference_dir() + "/renderings.json"));
  const ChatTemplate builtin = ChatTemplate::builtin(chat_format_for("MistralForCausalLM"));
  EXPECT_EQ(builtin.description(), "built-in Mistral");
  size_t compared = 0, refused = 0;
  for (const ordered_json& c : root["cases"]) {
    if (c["template"] != "mistral-v0.3" || !c["tools"].is_null()) continue;
    const std::string label =
        c["name"].get<std::string>() +
        (c["add_generation_prompt"].get<bool>() ? " (generation prompt)" : "");
    ChatRenderOptions options;
    options.add_generation_prompt = c["add_generation_prompt"];
    options.continue_final_message = c["continue_final_message"];
    if (c.contains("error")) {
      try {
        builtin.render(c["messages"], options);
        ADD_FAILURE() << label << ": rendered";
      } catch (const Error& error) {
        std::string expected = c["error"];
        expected[0] = char(std::tolower(static_cast<unsigned char>(expected[0])));
        EXPECT_NE(std::string(error.what()).find(expected.substr(0, expected.size() - 1)),
                  std::string::npos)
            << label << ": " << error.what();
      }
      ++refused;
      continue;
    }
    const std::string reference = c["rendered"];
    ASSERT_EQ(reference.rfind("<s>", 0), 0u) << label;
    EXPECT_EQ(builtin.render(c["messages"], options), reference.substr(3)) << label;
    ++compared;
  }
  EXPECT_EQ(compared, 24u);
  EXPECT_EQ(refused, 6u);
  const ordered_json tool_message = ordered_json::parse(R"([{"role": "tool", "content": "x"}])");
  EXPECT_THROW(builtin.render(tool_message, {}), Error);
}

TEST(ChatTemplateReference, ErrorsNameTheTemplateLineOrTheMessage) {
  const ordered_json messages = ordered_json::parse(R"([{"role": "user", "content": "x"},
      {"role": "assistant", "tool_calls": [{"function": {"name": "a", "arguments": {}}},
                                           {"function": {"name": "b", "arguments": {}}}]}])");
  try {
    template_named("llama-3.1").render(messages, {.add_generation_prompt = false});
    ADD_FAILURE() << "rendered";
  } catch (const Error& error) {
    EXPECT_STREQ(error.what(),
                 "template line 71: This model only supports single tool-calls at once!");
  }
  EXPECT_THROW(template_named("qwen3").render(ordered_json::array(), {}), Error);
  ChatRenderOptions both;
  both.continue_final_message = true;
  EXPECT_THROW(template_named("qwen3").render(messages, both), Error);
}

TEST(ChatTemplateReference, NamedTemplatesAndTheBuiltInFallback) {
  const std::string dir = testing::make_temp_dir("named-chat-templates");
  write_file_atomically(dir + "/tokenizer_config.json",
                        R"({"bos_token": {"content": "<s>"}, "chat_template": [
                  {"name": "default", "template": "{{ bos_token }}plain"},
                  {"name": "tool_use", "template": "{{ bos_token }}tools: {{ tools | length }}"}]})");
  const ChatTemplate named = ChatTemplate::load(dir, "Qwen3ForCausalLM");
  const ordered_json messages = ordered_json::parse(R"([{"role": "user", "content": "hi"}])");
  EXPECT_EQ(named.render(messages, {}), "<s>plain");
  ChatRenderOptions with_tools;
  with_tools.tools = ordered_json::parse(R"([{"type": "function", "function": {"name": "f"}}])");
  EXPECT_EQ(named.render(messages, with_tools), "<s>tools: 1");

  const ChatTemplate inline_source =
      ChatTemplate::from_source("{{ bos_token }}{{ messages[0].content }}<think>", "<s>");
  EXPECT_EQ(inline_source.render(messages, {}), "<s>hi<think>");
  EXPECT_TRUE(inline_source.writes_think_blocks());
  EXPECT_FALSE(named.writes_think_blocks());
  EXPECT_THROW(ChatTemplate::from_source("{% if %}"), Error);

  const ChatTemplate fallback =
      ChatTemplate::load(testing::testbed_model_dir(), "Qwen3ForCausalLM");
  EXPECT_FALSE(fallback.writes_special_tokens());
  EXPECT_EQ(fallback.render(messages, {}),
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_THROW(fallback.render(messages, with_tools), Error);
}

}  // namespace
}  // namespace oscar
