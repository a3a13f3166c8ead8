#pragma once
// The OpenAI API's response and stream-chunk objects for a parsed request's engine outputs.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/request.h"
#include "server/chat_output_parser.h"
#include "server/openai_request.h"

namespace oscar {

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
  // A chat chunk's delta: the role on the first, then reasoning, content and tool calls.
  nlohmann::json chat_delta(const ChatOutputDelta& parts, bool first);

  const ApiRequest* request_;
  const ServedModel* model_;
  size_t index_;
  std::string text_;
  // The tokens, their log-probabilities and the prompt's (echo) not yet rendered: all of them
  // (add), or in a stream those whose text is still held back (a partial UTF-8 character or a
  // possible stop string), which ride on the next chunk that shows text.
  RequestOutput pending_;
  FinishReason finish_ = FinishReason::none;
  int64_t prompt_tokens_ = 0;
  int64_t completion_tokens_ = 0;
  int64_t cached_tokens_ = 0;
  bool sent_role_ = false;
  ChatOutputParser chat_parser_;  // chat streams: splits the text as it comes
  size_t tool_calls_sent_ = 0;
};

// nlohmann::json::dump that replaces invalid UTF-8 instead of throwing.
std::string to_json_text(const nlohmann::json& value);

}  // namespace oscar
