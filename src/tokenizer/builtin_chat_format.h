#pragma once
// The built-in chat layouts, for checkpoints that ship no chat template: ChatML for Qwen, the
// Llama 3 header layout for Llama, [INST] for Mistral. (A checkpoint's own template is rendered
// by ChatTemplate.)
#include <span>
#include <string>
#include <string_view>

namespace oscar {

struct ChatMessage {
  std::string role;  // system, user, assistant
  std::string content;
};

enum class ChatFormat {
  chatml,  // Qwen: <|im_start|>role\ncontent<|im_end|>\n
  llama3,  // Llama 3: <|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|>
  // Mistral v0.3 Instruct: [INST] user[/INST] assistant</s>, the system prompt put before the
  // final user message; roles after it must alternate user/assistant.
  mistral,
};

ChatFormat chat_format_for(std::string_view architecture_name);

// With `add_generation_prompt`, ends with the opening of an assistant turn (Mistral has none:
// its prompt ends with [/INST] either way). Throws Error for a role or order the layout refuses.
std::string format_chat(std::span<const ChatMessage> messages, ChatFormat format,
                        bool add_generation_prompt);

}  // namespace oscar
