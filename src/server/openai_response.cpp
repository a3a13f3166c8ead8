#include "server/openai_response.h"

#include <span>
#include <utility>

namespace oscar {
namespace {

using nlohmann::json;

const char* finish_reason(FinishReason reason) {
  switch (reason) {
    case FinishReason::length:
      return "length";
    case FinishReason::stop:
      return "stop";
    case FinishReason::cancelled:
      return "abort";
    case FinishReason::error:
      return "error";
    case FinishReason::none:
      break;
  }
  return nullptr;
}

// OpenAI's tool_calls entry (a stream delta's carries its index among the choice's calls).
json tool_call_json(const ParsedToolCall& call) {
  return {{"id", call.id},
          {"type", "function"},
          {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
}

// A choice that called tools finishes with "tool_calls", as OpenAI's do.
json chat_finish_reason(FinishReason reason, bool called_tools) {
  if (reason == FinishReason::stop && called_tools) return "tool_calls";
  const char* text = finish_reason(reason);
  return text != nullptr ? json(text) : json();
}

// `output`'s tokens and values appended to `to`'s; the prompt's taken once they come.
void append(RequestOutput& to, const RequestOutput& output) {
  to.tokens.insert(to.tokens.end(), output.tokens.begin(), output.tokens.end());
  to.logprobs.insert(to.logprobs.end(), output.logprobs.begin(), output.logprobs.end());
  to.top_logprobs.insert(to.top_logprobs.end(), output.top_logprobs.begin(),
                         output.top_logprobs.end());
  if (!output.prompt_logprobs.empty()) {
    to.prompt_logprobs = output.prompt_logprobs;
    to.prompt_top_logprobs = output.prompt_top_logprobs;
  }
}

}  // namespace

std::string to_json_text(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

ResponseBuilder::ResponseBuilder(const ApiRequest& request, const ServedModel& model, size_t index)
    : request_(&request), model_(&model), index_(index), chat_parser_(request.chat_output) {
  if (request.echo) text_ = model.tokenizer->decode(request.prompt_of(index));
}

json ResponseBuilder::base(const char* object) const {
  return {{"id", request_->id},
          {"object", object},
          {"created", request_->created},
          {"model", model_->name}};
}

json ResponseBuilder::usage(const std::vector<ResponseBuilder>& choices) {
  int64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
  for (const ResponseBuilder& c : choices) {
    prompt_tokens += c.prompt_tokens_;
    completion_tokens += c.completion_tokens_;
    cached_tokens += c.cached_tokens_;
  }
  json usage = {{"prompt_tokens", prompt_tokens},
                {"completion_tokens", completion_tokens},
                {"total_tokens", prompt_tokens + completion_tokens}};
  if (cached_tokens > 0) usage["prompt_tokens_details"] = {{"cached_tokens", cached_tokens}};
  return usage;
}

json ResponseBuilder::logprobs_of(const RequestOutput& output, bool with_prompt) const {
  if (!request_->logprobs) return nullptr;
  // The most likely tokens at new token i (none where the request did not ask for them).
  auto top_at = [&](size_t i) {
    return i < output.top_logprobs.size() ? std::span<const TokenLogprob>(output.top_logprobs[i])
                                          : std::span<const TokenLogprob>();
  };
  if (request_->endpoint == Endpoint::chat_completions) {
    auto entry = [&](int32_t token, float logprob) {
      const std::string& bytes = model_->tokenizer->token_bytes(token);
      return json{{"token", bytes},
                  {"logprob", logprob},
                  {"bytes", std::vector<int>(bytes.begin(), bytes.end())}};
    };
    json content = json::array();
    for (size_t i = 0; i < output.tokens.size(); ++i) {
      json item = entry(output.tokens[i], output.logprobs[i]);
      item["top_logprobs"] = json::array();
      for (const TokenLogprob& top : top_at(i))
        item["top_logprobs"].push_back(entry(top.token, top.logprob));
      content.push_back(std::move(item));
    }
    return {{"content", content}};
  }
  // Completions: with echo, the prompt's tokens lead, the first without a value (nothing precedes
  // it), each other with its log-probability given the tokens before it.
  json tokens = json::array(), values = json::array(), tops = json::array();
  auto add = [&](int32_t token, json value, std::span<const TokenLogprob> most_likely,
                 bool has_top) {
    tokens.push_back(model_->tokenizer->token_bytes(token));
    values.push_back(std::move(value));
    json top = json::object();
    for (const TokenLogprob& t : most_likely)
      top[model_->tokenizer->token_bytes(t.token)] = t.logprob;
    tops.push_back(has_top ? std::move(top) : json(nullptr));
  };
  if (with_prompt) {
    const std::vector<int32_t>& prompt = request_->prompt_of(index_);
    for (size_t i = 0; i < prompt.size(); ++i) {
      const bool scored = i > 0 && i - 1 < output.prompt_logprobs.size();
      std::span<const TokenLogprob> most_likely;
      if (scored && i - 1 < output.prompt_top_logprobs.size())
        most_likely = output.prompt_top_logprobs[i - 1];
      add(prompt[i], scored ? json(output.prompt_logprobs[i - 1]) : json(nullptr), most_likely,
          scored);
    }
  }
  for (size_t i = 0; i < output.tokens.size(); ++i)
    add(output.tokens[i], output.logprobs[i], top_at(i), true);
  return {{"tokens", tokens},
          {"token_logprobs", values},
          {"top_logprobs", request_->generation.top_logprobs > 0 ? tops : json(nullptr)}};
}

json ResponseBuilder::chat_delta(const ChatOutputDelta& parts, bool first) {
  json delta = json::object();
  if (first) delta["role"] = "assistant";
  if (!parts.reasoning.empty()) delta["reasoning_content"] = parts.reasoning;
  if (!parts.content.empty()) delta["content"] = parts.content;
  if (!parts.tool_calls.empty()) {
    delta["tool_calls"] = json::array();
    for (const ParsedToolCall& call : parts.tool_calls) {
      json entry = tool_call_json(call);
      entry["index"] = tool_calls_sent_++;
      delta["tool_calls"].push_back(std::move(entry));
    }
  }
  return delta;
}

std::optional<json> ResponseBuilder::chunk(const RequestOutput& output) {
  prompt_tokens_ = output.prompt_tokens;
  completion_tokens_ = output.generated_tokens;
  cached_tokens_ = output.cached_prompt_tokens;
  std::string text = output.text;
  if (request_->echo && !sent_role_)
    text = text_ + text;  // the echoed prompt rides on the first chunk
  const bool first = !sent_role_;
  sent_role_ = true;
  append(pending_, output);
  const bool chat = request_->endpoint == Endpoint::chat_completions;
  ChatOutputDelta parts;
  if (chat) {
    parts = chat_parser_.push(text);
    if (output.finished) parts.append(chat_parser_.finish());
  }
  const bool nothing_to_show = chat ? parts.empty() && !first : text.empty();
  if (nothing_to_show && !output.finished) return std::nullopt;
  // The echoed prompt's values ride with its text, on the first chunk.
  const RequestOutput shown = std::exchange(pending_, {});
  json choice = {{"index", index_}, {"logprobs", logprobs_of(shown, request_->echo && first)}};
  if (!chat) {
    choice["finish_reason"] = output.finished ? json(finish_reason(output.finish_reason)) : json();
    choice["text"] = text;
    json c = base("text_completion");
    c["choices"] = json::array({choice});
    return c;
  }
  choice["delta"] = chat_delta(parts, first);
  choice["finish_reason"] =
      output.finished ? chat_finish_reason(output.finish_reason, tool_calls_sent_ > 0) : json();
  json c = base("chat.completion.chunk");
  c["choices"] = json::array({choice});
  return c;
}

json ResponseBuilder::usage_chunk(const std::vector<ResponseBuilder>& choices) {
  const ResponseBuilder& first = choices.at(0);
  json c = first.base(first.request_->endpoint == Endpoint::completions ? "text_completion"
                                                                        : "chat.completion.chunk");
  c["choices"] = json::array();
  c["usage"] = usage(choices);
  return c;
}

void ResponseBuilder::add(const RequestOutput& output) {
  prompt_tokens_ = output.prompt_tokens;
  completion_tokens_ = output.generated_tokens;
  cached_tokens_ = output.cached_prompt_tokens;
  text_ += output.text;
  append(pending_, output);
  if (output.finished) finish_ = output.finish_reason;
}

json ResponseBuilder::choice() const {
  json choice = {{"index", index_},
                 {"logprobs", logprobs_of(pending_, request_->echo)},
                 {"finish_reason", finish_reason(finish_)}};
  if (request_->endpoint == Endpoint::completions) {
    choice["text"] = text_;
    return choice;
  }
  ChatOutputParser parser(request_->chat_output);
  ChatOutputDelta parts = parser.push(text_);
  parts.append(parser.finish());
  json message = {{"role", "assistant"}};
  const bool other_parts = !parts.tool_calls.empty() || !parts.reasoning.empty();
  message["content"] = parts.content.empty() && other_parts ? json() : json(parts.content);
  if (request_->chat_output.split_reasoning) {
    message["reasoning_content"] = parts.reasoning.empty() ? json() : json(parts.reasoning);
  }
  if (!parts.tool_calls.empty()) {
    message["tool_calls"] = json::array();
    for (const ParsedToolCall& call : parts.tool_calls)
      message["tool_calls"].push_back(tool_call_json(call));
  }
  choice["message"] = std::move(message);
  choice["finish_reason"] = chat_finish_reason(finish_, !parts.tool_calls.empty());
  return choice;
}

json ResponseBuilder::response(const std::vector<ResponseBuilder>& choices) {
  const ResponseBuilder& first = choices.at(0);
  json r = first.base(first.request_->endpoint == Endpoint::completions ? "text_completion"
                                                                        : "chat.completion");
  r["choices"] = json::array();
  for (const ResponseBuilder& c : choices) r["choices"].push_back(c.choice());
  r["usage"] = usage(choices);
  return r;
}

}  // namespace oscar
