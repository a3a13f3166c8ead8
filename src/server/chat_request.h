#pragma once
// The chat part of a chat completions (or /tokenize) request: messages, tools, tool_choice,
// chat_template_kwargs, add_generation_prompt and continue_final_message, checked field by field
// and rendered with the model's chat template into the prompt's tokens.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/chat_output_parser.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace oscar {

struct ChatPrompt {
  std::string text;
  std::vector<int32_t> tokens;
  ChatOutputOptions output;  // how to read what the model answers
};

// `body` is the request as sent (its key order is kept: tools' JSON schemas reach the template as
// written). Throws ApiError 400 naming the field at fault, or quoting the template's refusal.
ChatPrompt render_chat_prompt(const nlohmann::ordered_json& body, const ChatTemplate& chat_template,
                              bool split_reasoning, const Tokenizer& tokenizer);

}  // namespace oscar
