#pragma once
// A model's chat prompt as the model defines it: the Jinja chat template of its checkpoint
// (chat_template.jinja, or tokenizer_config.json's chat_template), rendered as Hugging Face
// transformers' apply_chat_template does; the built-in layout where the checkpoint has none.
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "jinja/template.h"
#include "tokenizer/builtin_chat_format.h"

namespace oscar {

struct ChatRenderOptions {
  nlohmann::ordered_json tools;  // null: none
  nlohmann::ordered_json template_kwargs =
      nlohmann::ordered_json::object();  // chat_template_kwargs
  bool add_generation_prompt = true;
  // The prompt ends inside the final (assistant) message, for the model to go on with it.
  bool continue_final_message = false;
};

class ChatTemplate {
 public:
  // <model_dir>/chat_template.jinja, else tokenizer_config.json's chat_template (a string, or a
  // list of named templates: "default", and "tool_use" for requests with tools), else the
  // built-in layout of the architecture. Throws Error naming the file at fault.
  static ChatTemplate load(const std::string& model_dir, std::string_view architecture_name);
  // A template file given on the command line (--chat-template), with the special tokens of
  // <model_dir>/tokenizer_config.json.
  static ChatTemplate load_file(const std::string& path, const std::string& model_dir);
  static ChatTemplate from_source(std::string_view source, std::string bos_token = {},
                                  std::string eos_token = {});
  static ChatTemplate builtin(ChatFormat format);

  // `messages` as the OpenAI API lists them (role, content, tool_calls, ...). Throws Error naming
  // the template line at fault, or the message the template refuses.
  std::string render(const nlohmann::ordered_json& messages,
                     const ChatRenderOptions& options) const;

  // A checkpoint template writes its own special tokens (BOS included): encode its text without
  // the tokenizer's post-processor, as transformers does. The built-in layout relies on it.
  bool writes_special_tokens() const { return default_ != nullptr; }
  // Whether the template writes <think> blocks (Qwen3's reasoning), so answers may hold one.
  bool writes_think_blocks() const { return writes_think_blocks_; }
  std::string description() const;

 private:
  std::shared_ptr<const jinja::Template> default_, tool_use_;
  std::string source_name_;
  std::string bos_token_, eos_token_;
  ChatFormat builtin_format_ = ChatFormat::chatml;
  bool writes_think_blocks_ = false;
};

}  // namespace oscar
