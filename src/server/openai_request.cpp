#include "server/openai_request.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <utility>

#include <fmt/format.h>

#include "server/api_error.h"
#include "server/chat_request.h"
#include "server/request_fields.h"
#include "util/error.h"

namespace oscar {
namespace {

using nlohmann::json;

template <typename T>
T number(const json& body, const char* key, T fallback) {
  const json* value = field(body, key);
  if (value == nullptr) return fallback;
  if constexpr (std::is_integral_v<T>) {
    if (!value->is_number_integer())
      throw invalid_request(fmt::format("'{}' must be an integer", key), key);
  } else {
    if (!value->is_number()) throw invalid_request(fmt::format("'{}' must be a number", key), key);
  }
  return value->get<T>();
}

std::vector<std::string> stop_strings(const json& body) {
  const json* stop = field(body, "stop");
  if (stop == nullptr) return {};
  if (stop->is_string()) return {stop->get<std::string>()};
  if (!stop->is_array() || stop->size() > 16) {
    throw invalid_request("'stop' must be a string or a list of at most 16 strings", "stop");
  }
  std::vector<std::string> out;
  for (const json& s : *stop) {
    if (!s.is_string() || s.get<std::string>().empty()) {
      throw invalid_request("'stop' entries must be non-empty strings", "stop");
    }
    out.push_back(s.get<std::string>());
  }
  return out;
}

std::vector<int32_t> encode(const ServedModel& model, const std::string& text, const char* param) {
  try {
    return model.tokenizer->encode(text);
  } catch (const Error& error) {
    throw invalid_request(fmt::format("'{}': {}", param, error.what()), param);
  }
}

// The token ids of field `param`, each in the vocabulary.
std::vector<int32_t> token_ids(const json& ids, const ServedModel& model,
                               const char* param = "prompt") {
  std::vector<int32_t> out;
  for (const json& id : ids) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() >= model.tokenizer->vocab_size()) {
      throw invalid_request(fmt::format("'{}' token ids must be integers in the vocabulary", param),
                            param);
    }
    out.push_back(id.get<int32_t>());
  }
  return out;
}

// A string, a list of token ids, or a list of either (one choice each).
std::vector<std::vector<int32_t>> completion_prompts(const json& body, const ServedModel& model) {
  const json* prompt = field(body, "prompt");
  if (prompt == nullptr) throw invalid_request("'prompt' is required", "prompt");
  if (prompt->is_string()) return {encode(model, prompt->get<std::string>(), "prompt")};
  if (prompt->is_array() && !prompt->empty() && (*prompt)[0].is_number_integer())
    return {token_ids(*prompt, model)};
  if (!prompt->is_array() || prompt->empty() || prompt->size() > kMaxPromptsPerRequest) {
    throw invalid_request(
        fmt::format(
            "'prompt' must be a string, a list of token ids, or a list of 1 to {} of either",
            kMaxPromptsPerRequest),
        "prompt");
  }
  std::vector<std::vector<int32_t>> prompts;
  for (const json& one : *prompt) {
    if (one.is_string()) {
      prompts.push_back(encode(model, one.get<std::string>(), "prompt"));
    } else if (one.is_array()) {
      prompts.push_back(token_ids(one, model));
    } else {
      throw invalid_request("'prompt' list entries must be strings or lists of token ids",
                            "prompt");
    }
  }
  return prompts;
}

ChatPrompt chat_prompt(const std::string& text, const ServedModel& model) {
  // Parsed again with its keys in the order sent: the template writes tools' schemas as given.
  return render_chat_prompt(nlohmann::ordered_json::parse(text), model.chat_template,
                            model.split_reasoning, *model.tokenizer);
}

// OpenAI's logit_bias: {"token id": bias}, ids of the vocabulary.
std::vector<std::pair<int32_t, float>> logit_bias(const json& body, const ServedModel& model) {
  const json* biases = field(body, "logit_bias");
  if (biases == nullptr) return {};
  if (!biases->is_object()) {
    throw invalid_request("'logit_bias' must be an object of token ids to numbers", "logit_bias");
  }
  std::vector<std::pair<int32_t, float>> out;
  for (const auto& [key, value] : biases->items()) {
    int64_t token = -1;
    const auto [end, error] = std::from_chars(key.data(), key.data() + key.size(), token);
    if (error != std::errc{} || end != key.data() + key.size() || token < 0 ||
        token >= model.tokenizer->vocab_size()) {
      throw invalid_request(
          fmt::format("'logit_bias' key '{}' is not a token id of the vocabulary (0..{})", key,
                      model.tokenizer->vocab_size() - 1),
          "logit_bias");
    }
    // Their range is the sampler's to check (validate, read_sampling).
    if (!value.is_number()) {
      throw invalid_request(fmt::format("'logit_bias' values must be numbers (token {})", key),
                            "logit_bias");
    }
    out.emplace_back(int32_t(token), value.get<float>());
  }
  return out;
}

// response_format: text, or OpenAI's JSON mode (json_object). A JSON schema is refused, not
// ignored: its client must not get free text as if the schema had been followed.
bool json_object_mode(const json& body) {
  const json* format = field(body, "response_format");
  if (format == nullptr) return false;
  const json* type = format->is_object() ? field(*format, "type") : nullptr;
  if (type != nullptr && *type == "text") return false;
  if (type != nullptr && *type == "json_object") return true;
  throw invalid_request(
      "'response_format' must be {\"type\": \"text\"} or {\"type\": \"json_object\"} (JSON schemas "
      "are not supported)",
      "response_format");
}

// Fields that would change what comes back and that this server does not implement are refused
// rather than ignored: a client that asks for tool calls (outside chat), several candidates or an
// insertion suffix must not get plain text as if it had been honoured.
void refuse_unsupported(const json& body, Endpoint endpoint) {
  if (number<int64_t>(body, "best_of", 1) != 1)
    throw invalid_request("only best_of = 1 is supported", "best_of");
  if (const json* suffix = field(body, "suffix");
      suffix != nullptr && !(suffix->is_string() && suffix->empty())) {
    throw invalid_request("'suffix' (insertion) is not supported", "suffix");
  }
  for (const char* calls : {"tools", "functions"}) {
    if (endpoint == Endpoint::chat_completions && std::string_view(calls) == "tools") continue;
    if (const json* list = field(body, calls);
        list != nullptr && !(list->is_array() && list->empty())) {
      throw invalid_request(
          fmt::format("'{}' is not supported here (chat completions take 'tools')", calls), calls);
    }
  }
}

void read_sampling(const json& body, const ServedModel& model, SamplingParams& s) {
  s.temperature = number<float>(body, "temperature", 1.0f);
  s.top_p = number<float>(body, "top_p", 1.0f);
  const int64_t top_k = number<int64_t>(body, "top_k", 0);
  if (top_k < -1) throw invalid_request("'top_k' must be -1 (off), 0 (off) or positive", "top_k");
  s.top_k = top_k < 0 ? 0 : int32_t(top_k);
  s.min_p = number<float>(body, "min_p", 0.0f);
  s.repetition_penalty = number<float>(body, "repetition_penalty", 1.0f);
  s.frequency_penalty = number<float>(body, "frequency_penalty", 0.0f);
  s.presence_penalty = number<float>(body, "presence_penalty", 0.0f);
  s.logit_bias = logit_bias(body, model);
  if (const json* seed = field(body, "seed")) {
    if (!seed->is_number_integer()) throw invalid_request("'seed' must be an integer", "seed");
    s.seed = uint64_t(seed->get<int64_t>());
  }
  try {
    validate(s);
  } catch (const Error& error) {
    const std::string message = error.what();
    throw invalid_request(message, message.substr(0, message.find(' ')));
  }
}

std::string random_id(const char* prefix) {
  static std::atomic<uint64_t> counter{0};
  const auto now = std::chrono::system_clock::now().time_since_epoch().count();
  return fmt::format("{}-{:x}{:04x}", prefix, uint64_t(now), counter++ & 0xffff);
}

}  // namespace

ServedModel make_served_model(std::string name, const Tokenizer& tokenizer,
                              std::string_view architecture_name,
                              std::vector<int32_t> eos_token_ids, int64_t max_model_len) {
  ServedModel served;
  served.name = std::move(name);
  served.tokenizer = &tokenizer;
  served.chat_template = ChatTemplate::builtin(chat_format_for(architecture_name));
  served.eos_token_ids = eos_token_ids;
  served.chat_stop_token_ids = std::move(eos_token_ids);
  for (const char* end_of_turn : {"<|im_end|>", "<|eot_id|>"}) {
    if (const auto id = tokenizer.token_id(end_of_turn)) served.chat_stop_token_ids.push_back(*id);
  }
  served.max_model_len = max_model_len;
  return served;
}

void use_chat_template(ServedModel& model, ChatTemplate chat_template) {
  model.split_reasoning = chat_template.writes_think_blocks();
  model.chat_template = std::move(chat_template);
}

namespace {

// A request body: a JSON object naming this server's model, if it names one.
json parse_body(const std::string& text, const ServedModel& model) {
  json body;
  try {
    body = json::parse(text);
  } catch (const json::exception& error) {
    throw invalid_request(
        fmt::format("the request body is not valid JSON (UTF-8): {}", error.what()));
  }
  if (!body.is_object()) throw invalid_request("the request body must be a JSON object");
  if (const json* name = field(body, "model")) {
    if (!name->is_string()) throw invalid_request("'model' must be a string", "model");
    if (name->get<std::string>() != model.name) {
      throw ApiError(404, "model_not_found",
                     fmt::format("the model '{}' does not exist; this server serves '{}'",
                                 name->get<std::string>(), model.name),
                     "model");
    }
  }
  return body;
}

}  // namespace

json tokenize_response(const std::string& text, const ServedModel& model) {
  const json body = parse_body(text, model);
  std::vector<int32_t> tokens;
  if (field(body, "messages") != nullptr) {
    tokens = chat_prompt(text, model).tokens;
  } else {
    const json* prompt = field(body, "prompt");
    if (prompt == nullptr || !prompt->is_string()) {
      throw invalid_request("'prompt' (a string) or 'messages' is required", "prompt");
    }
    tokens = encode(model, prompt->get<std::string>(), "prompt");
  }
  return {{"tokens", tokens}, {"count", tokens.size()}, {"max_model_len", model.max_model_len}};
}

json detokenize_response(const std::string& text, const ServedModel& model) {
  const json body = parse_body(text, model);
  const json* tokens = field(body, "tokens");
  if (tokens == nullptr || !tokens->is_array())
    throw invalid_request("'tokens' must be a list of token ids", "tokens");
  return {{"prompt", model.tokenizer->decode(token_ids(*tokens, model, "tokens"))}};
}

ApiRequest parse_api_request(const std::string& text, Endpoint endpoint, const ServedModel& model) {
  const json body = parse_body(text, model);
  ApiRequest request;
  request.endpoint = endpoint;
  request.id = random_id(endpoint == Endpoint::completions ? "cmpl" : "chatcmpl");
  request.created = std::chrono::duration_cast<std::chrono::seconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
  GenerationRequest& g = request.generation;
  if (endpoint == Endpoint::completions) {
    request.prompts = completion_prompts(body, model);
  } else {
    ChatPrompt chat = chat_prompt(text, model);
    request.prompts = {std::move(chat.tokens)};
    request.chat_output = chat.output;
  }
  const char* prompt_key = endpoint == Endpoint::completions ? "prompt" : "messages";
  // vLLM's truncate_prompt_tokens: each prompt keeps its last k tokens (-1: the model's context).
  if (field(body, "truncate_prompt_tokens") != nullptr) {
    int64_t keep = number<int64_t>(body, "truncate_prompt_tokens", -1);
    if (keep == -1) keep = model.max_model_len;
    if (keep < 1)
      throw invalid_request("'truncate_prompt_tokens' must be -1 or at least 1",
                            "truncate_prompt_tokens");
    for (std::vector<int32_t>& prompt : request.prompts) {
      if (int64_t(prompt.size()) > keep) prompt.erase(prompt.begin(), prompt.end() - keep);
    }
  }
  size_t longest = 0;
  for (const std::vector<int32_t>& prompt : request.prompts) {
    if (prompt.empty()) throw invalid_request("the prompt is empty", prompt_key);
    longest = std::max(longest, prompt.size());
  }
  request.n = number<int64_t>(body, "n", 1);
  if (request.n < 1 || request.n > kMaxChoicesPerPrompt) {
    throw invalid_request(fmt::format("'n' must lie in [1, {}]", kMaxChoicesPerPrompt), "n");
  }
  if (request.choices() > kMaxChoicesPerRequest) {
    throw invalid_request(
        fmt::format("{} prompts with n = {} make {} choices, more than {}", request.prompts.size(),
                    request.n, request.choices(), kMaxChoicesPerRequest),
        "n");
  }
  refuse_unsupported(body, endpoint);
  g.json_object = json_object_mode(body);
  read_sampling(body, model, g.sampling);
  const int64_t room = model.max_model_len - int64_t(longest);
  if (room < 1) {
    throw invalid_request(
        fmt::format("the prompt has {} tokens; this model's maximum context length is {} tokens",
                    longest, model.max_model_len),
        prompt_key);
  }
  if (endpoint == Endpoint::completions) {
    // logprobs N: the sampled token's and the N most likely ones' (null or absent: none).
    const int64_t logprobs = number<int64_t>(body, "logprobs", -1);
    if (field(body, "logprobs") != nullptr && (logprobs < 0 || logprobs > 5)) {
      throw invalid_request("'logprobs' must lie in [0, 5]", "logprobs");
    }
    request.logprobs = logprobs >= 0;
    g.top_logprobs = int32_t(std::max<int64_t>(logprobs, 0));
    request.echo = boolean(body, "echo", false);
    g.prompt_logprobs = request.echo && request.logprobs;
  } else {
    request.logprobs = boolean(body, "logprobs", false);
    const int64_t top = number<int64_t>(body, "top_logprobs", 0);
    if (top < 0 || top > kMaxTopLogprobs) {
      throw invalid_request(fmt::format("'top_logprobs' must lie in [0, {}]", kMaxTopLogprobs),
                            "top_logprobs");
    }
    if (top > 0 && !request.logprobs)
      throw invalid_request("'top_logprobs' needs 'logprobs': true", "top_logprobs");
    g.top_logprobs = int32_t(top);
  }
  g.logprobs = request.logprobs;
  const char* max_key =
      field(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  const int64_t default_max =
      endpoint == Endpoint::completions ? std::min<int64_t>(16, room) : room;
  g.stop.max_tokens = number<int64_t>(body, max_key, default_max);
  // 0 only to score an echoed prompt (its tokens' log-probabilities, nothing generated).
  if (g.stop.max_tokens < (g.prompt_logprobs ? 0 : 1)) {
    throw invalid_request(
        fmt::format("'{}' must be at least 1 (0 with echo and logprobs)", max_key), max_key);
  }
  if (g.stop.max_tokens > room) {
    throw invalid_request(
        fmt::format("'{}' is {}, but the prompt ({} tokens) leaves room for {} in the model's "
                    "context of {} tokens",
                    max_key, g.stop.max_tokens, longest, room, model.max_model_len),
        max_key);
  }
  g.stop.stop_strings = stop_strings(body);
  if (!boolean(body, "ignore_eos", false)) {
    g.stop.stop_token_ids =
        endpoint == Endpoint::completions ? model.eos_token_ids : model.chat_stop_token_ids;
  }
  // vLLM's extensions: more tokens that end a choice (also with ignore_eos), and the fewest new
  // tokens before any stop may end it.
  if (const json* ids = field(body, "stop_token_ids")) {
    if (!ids->is_array())
      throw invalid_request("'stop_token_ids' must be a list of token ids", "stop_token_ids");
    for (const int32_t id : token_ids(*ids, model, "stop_token_ids"))
      g.stop.stop_token_ids.push_back(id);
  }
  g.stop.include_stop_string = boolean(body, "include_stop_str_in_output", false);
  g.skip_special_tokens = boolean(body, "skip_special_tokens", true);
  g.stop.min_tokens = number<int64_t>(body, "min_tokens", 0);
  if (g.stop.min_tokens < 0 || g.stop.min_tokens > g.stop.max_tokens) {
    throw invalid_request(
        fmt::format("'min_tokens' must lie in [0, {}] ('{}')", g.stop.max_tokens, max_key),
        "min_tokens");
  }
  request.stream = boolean(body, "stream", false);
  if (const json* options = field(body, "stream_options")) {
    if (!options->is_object())
      throw invalid_request("'stream_options' must be an object", "stream_options");
    request.include_usage = boolean(*options, "include_usage", false);
  }
  return request;
}

GenerationRequest ApiRequest::for_choice(size_t index) const {
  GenerationRequest choice = generation;
  choice.prompt = prompt_of(index);
  if (choice.sampling.seed) *choice.sampling.seed += index % size_t(n);
  return choice;
}

}  // namespace oscar
