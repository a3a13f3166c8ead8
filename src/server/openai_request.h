#pragma once
// Requests of the OpenAI completions and chat completions API (and vLLM's tokenizer routes),
// parsed and checked field by field: an error names the parameter at fault.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/request.h"
#include "server/chat_output_parser.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace oscar {

enum class Endpoint { completions, chat_completions };

// What the server needs to know about the model to read a request.
struct ServedModel {
  std::string name;
  const Tokenizer* tokenizer = nullptr;
  ChatTemplate chat_template = ChatTemplate::builtin(ChatFormat::chatml);
  bool split_reasoning = false;              // chat answers' <think> blocks go to reasoning_content
  std::vector<int32_t> eos_token_ids;        // completions stop on these
  std::vector<int32_t> chat_stop_token_ids;  // chat also stops at the end-of-turn token
  int64_t max_model_len = 0;
};

// Completions stop at the model's EOS tokens; chat also at the end of an assistant turn
// (<|im_end|> or <|eot_id|>, whichever the vocabulary holds). Chat uses the architecture's
// built-in layout until use_chat_template gives the checkpoint's own.
ServedModel make_served_model(std::string name, const Tokenizer& tokenizer,
                              std::string_view architecture_name,
                              std::vector<int32_t> eos_token_ids, int64_t max_model_len);
// A template that writes <think> blocks (Qwen3's) has chat answers' reasoning split off.
void use_chat_template(ServedModel& model, ChatTemplate chat_template);

// Completions take up to this many prompts in one request; each prompt gets n choices (n up to
// kMaxChoicesPerPrompt), and a request at most kMaxChoicesPerRequest.
inline constexpr size_t kMaxPromptsPerRequest = 256;
inline constexpr int64_t kMaxChoicesPerPrompt = 16;
inline constexpr size_t kMaxChoicesPerRequest = 256;

struct ApiRequest {
  Endpoint endpoint = Endpoint::completions;
  // What every choice asks of the engine but its prompt: choice i's prompt is prompts[i / n] (one
  // prompt for chat; completions may list several), n choices a prompt.
  GenerationRequest generation;
  std::vector<std::vector<int32_t>> prompts;
  int64_t n = 1;
  std::string id;       // the response's id ("cmpl-..." or "chatcmpl-...")
  int64_t created = 0;  // Unix seconds
  bool stream = false;
  bool include_usage = false;     // stream_options.include_usage
  bool logprobs = false;          // report the log-probability of each sampled token (and the
                                  // generation's top_logprobs most likely tokens at it)
  bool echo = false;              // completions: the prompt text (and, with logprobs, its tokens'
                                  // log-probabilities) leads the result
  ChatOutputOptions chat_output;  // chat: how the answer splits into reasoning, content, tool calls

  size_t choices() const { return prompts.size() * size_t(n); }
  const std::vector<int32_t>& prompt_of(size_t choice) const {
    return prompts.at(choice / size_t(n));
  }
  // Choice j of a prompt draws with seed + j where the request sets a seed.
  GenerationRequest for_choice(size_t index) const;
};

// Throws ApiError (400 invalid_request_error, 404 model_not_found) naming the field at fault.
ApiRequest parse_api_request(const std::string& body, Endpoint endpoint, const ServedModel& model);

// vLLM's /tokenize ({"prompt"} or chat {"messages"} -> tokens, count, max_model_len) and
// /detokenize ({"tokens"} -> prompt); errors as parse_api_request's.
nlohmann::json tokenize_response(const std::string& body, const ServedModel& model);
nlohmann::json detokenize_response(const std::string& body, const ServedModel& model);

}  // namespace oscar
