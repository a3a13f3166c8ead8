#include "tokenizer/builtin_chat_format.h"

#include "util/error.h"

namespace oscar {

ChatFormat chat_format_for(std::string_view architecture_name) {
  if (architecture_name == "LlamaForCausalLM") return ChatFormat::llama3;
  return ChatFormat::chatml;
}

std::string format_chat(std::span<const ChatMessage> messages, ChatFormat format,
                        bool add_generation_prompt) {
  // Llama 3's <|begin_of_text|> comes from the tokenizer's post-processor when the prompt is
  // encoded, so it is not written here.
  std::string prompt;
  for (const ChatMessage& message : messages) {
    require(message.role == "system" || message.role == "user" || message.role == "assistant",
            "messages: role '{}' is not supported (system, user or assistant)", message.role);
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
