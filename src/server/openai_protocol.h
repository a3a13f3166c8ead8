#pragma once
// The OpenAI completions and chat completions API: requests parsed and checked field by field
// (an error names the parameter), and the response and stream-chunk objects.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/request.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace oscar {

enum class Endpoint { completions, chat_completions };

// What the server needs to know about the model to read a request.
struct ServedModel {
  std::string name;
  const Tokenizer* tokenizer = nullptr;
  ChatFormat chat_format = ChatFormat::chatml;
  std::vector<int32_t> eos_token_ids;      // completions stop on these
  std::vector<int32_t> chat_stop_token_ids;  // chat also stops at the end-of-turn token
  int64_t max_model_len = 0;
};

// Completions stop at the model's EOS tokens; chat also at the end of an assistant turn
// (<|im_end|> or <|eot_id|>, whichever the vocabulary holds).
ServedModel make_served_model(std::string name, const Tokenizer& tokenizer, std::string_view architecture_name,
                              std::vector<int32_t> eos_token_ids, int64_t max_model_len);

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
  std::string id;        // the response's id ("cmpl-..." or "chatcmpl-...")
  int64_t created = 0;   // Unix seconds
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool logprobs = false;       // report the log-probability of each sampled token (and the
                               // generation's top_logprobs most likely tokens at it)
  bool echo = false;           // completions: the prompt text (and, with logprobs, its tokens'
                               // log-probabilities) leads the result

  size_t choices() const { return prompts.size() * size_t(n); }
  const std::vector<int32_t>& prompt_of(size_t choice) const { return prompts.at(choice / size_t(n)); }
  // Choice j of a prompt draws with seed + j where the request sets a seed.
  GenerationRequest for_choice(size_t index) const;
};

// Throws ApiError (400 invalid_request_error, 404 model_not_found) naming the field at fault.
ApiRequest parse_api_request(const std::string& body, Endpoint endpoint, const ServedModel& model);

// vLLM's /tokenize ({"prompt"} or chat {"messages"} -> tokens, count, max_model_len) and
// /detokenize ({"tokens"} -> prompt); errors as parse_api_request's.
nlohmann::json tokenize_response(const std::string& body, const ServedModel& model);
nlohmann::json detokenize_response(const std::string& body, const ServedModel& model);

// Accumulates the outputs of one choice of a request and renders the API's JSON objects.
class ResponseBuilder {
 public:
  ResponseBuilder(const ApiRequest& request, const ServedModel& model, size_t index = 0);

  // The stream chunk for one engine output (nullopt when it carries nothing to show).
  std::optional<nlohmann::json> chunk(const RequestOutput& output);
  // Record an output (non-streaming); `response` once every choice finished.
  void add(const RequestOutput& output);

  // For the request whose choices these builders hold, in order (usage summed over them): the
  // response, and the stream's chunk with usage only (stream_options.include_usage).
  static nlohmann::json response(const std::vector<ResponseBuilder>& choices);
  static nlohmann::json usage_chunk(const std::vector<ResponseBuilder>& choices);

 private:
  // `with_prompt`: completions with echo lead with the prompt's tokens and log-probabilities.
  nlohmann::json logprobs_of(const RequestOutput& output, bool with_prompt) const;
  nlohmann::json choice() const;  // the whole choice, once finished
  static nlohmann::json usage(const std::vector<ResponseBuilder>& choices);
  nlohmann::json base(const char* object) const;

  const ApiRequest* request_;
  const ServedModel* model_;
  size_t index_;
  std::string text_;
  std::vector<int32_t> tokens_;
  std::vector<float> logprobs_;
  std::vector<std::vector<TokenLogprob>> top_logprobs_;
  std::vector<float> prompt_logprobs_;  // echo with logprobs: the prompt's, once the prompt is done
  std::vector<std::vector<TokenLogprob>> prompt_top_logprobs_;
  // Streaming: tokens whose text is still held back (a partial UTF-8 character or a possible stop
  // string) ride, with their log-probabilities, on the next chunk that shows text.
  std::vector<int32_t> unsent_tokens_;
  std::vector<float> unsent_logprobs_;
  std::vector<std::vector<TokenLogprob>> unsent_top_logprobs_;
  FinishReason finish_ = FinishReason::none;
  int64_t prompt_tokens_ = 0;
  int64_t completion_tokens_ = 0;
  int64_t cached_tokens_ = 0;
  bool sent_role_ = false;
};

// nlohmann::json::dump that replaces invalid UTF-8 instead of throwing.
std::string to_json_text(const nlohmann::json& value);

}  // namespace oscar
