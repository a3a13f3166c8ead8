#include "tokenizer/builtin_chat_format.h"

#include "util/error.h"

namespace oscar {
namespace {

// Jinja's trim (Python's str.strip) on the whitespace oscar's Jinja strips.
std::string trimmed(const std::string& text) {
  constexpr const char* kWhitespace = " \t\n\r\f\v";
  const size_t begin = text.find_first_not_of(kWhitespace);
  if (begin == std::string::npos) return {};
  return text.substr(begin, text.find_last_not_of(kWhitespace) - begin + 1);
}

// Mistral-7B-Instruct-v0.3's chat template (models/reference-chat/mistral-v0.3) on messages
// without tools, its refusals worded as it words them. Its <s> comes from the tokenizer's
// post-processor when the prompt is encoded; its </s> after each answer is written here.
std::string format_mistral(std::span<const ChatMessage> messages) {
  const bool has_system = !messages.empty() && messages.front().role == "system";
  const std::span<const ChatMessage> turns = has_system ? messages.subspan(1) : messages;
  for (size_t i = 0; i < turns.size(); ++i) {
    require((turns[i].role == "user") == (i % 2 == 0),
            "messages: after the optional system message, conversation roles must alternate "
            "user/assistant/user/assistant/...");
  }
  std::string prompt;
  for (size_t i = 0; i < turns.size(); ++i) {
    const ChatMessage& message = turns[i];
    if (message.role == "user") {
      const bool last = i + 1 == turns.size();
      const std::string system =
          last && has_system ? messages.front().content + "\n\n" : std::string();
      prompt += "[INST] " + system + message.content + "[/INST]";
    } else {
      require(message.role == "assistant",
              "messages: only user and assistant roles are supported, with the exception of an "
              "initial optional system message");
      prompt += " " + trimmed(message.content) + "</s>";
    }
  }
  return prompt;
}

}  // namespace

ChatFormat chat_format_for(std::string_view architecture_name) {
  if (architecture_name == "LlamaForCausalLM") return ChatFormat::llama3;
  if (architecture_name == "MistralForCausalLM") return ChatFormat::mistral;
  return ChatFormat::chatml;
}

std::string format_chat(std::span<const ChatMessage> messages, ChatFormat format,
                        bool add_generation_prompt) {
  for (const ChatMessage& message : messages) {
    require(message.role == "system" || message.role == "user" || message.role == "assistant",
            "messages: role '{}' is not supported (system, user or assistant)", message.role);
  }
  if (format == ChatFormat::mistral) return format_mistral(messages);
  // Llama 3's <|begin_of_text|> comes from the tokenizer's post-processor when the prompt is
  // encoded, so it is not written here.
  std::string prompt;
  for (const ChatMessage& message : messages) {
    if (format == ChatFormat::chatml) {
      prompt += "<|im_start|>" + message.role + "\n" + message.content + "<|im_end|>\n";
    } else {
      prompt += "<|start_header_id|>" + message.role + "<|end_header_id|>\n\n" + message.content +
                "<|eot_id|>";
    }
  }
  if (add_generation_prompt) {
    prompt += format == ChatFormat::chatml ? "<|im_start|>assistant\n"
                                           : "<|start_header_id|>assistant<|end_header_id|>\n\n";
  }
  return prompt;
}

}  // namespace oscar
