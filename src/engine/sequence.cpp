#include "engine/sequence.h"

#include "tokenizer/tokenizer.h"

namespace oscar {

std::string_view to_string(FinishReason reason) {
  switch (reason) {
    case FinishReason::none:
      return "none";
    case FinishReason::length:
      return "length";
    case FinishReason::stop:
      return "stop";
    case FinishReason::cancelled:
      return "cancelled";
    case FinishReason::error:
      return "error";
  }
  return "?";
}

Sequence::Sequence(RequestId request_id, GenerationRequest generation_request,
                   const Tokenizer* tokenizer)
    : id(request_id),
      request(std::move(generation_request)),
      tokens(request.prompt),
      pages(request.full_precision_prefill ? int64_t(request.prompt.size()) : 0),
      sampler(request.sampling),
      stop_matcher(request.stop.stop_strings, request.stop.include_stop_string),
      arrival_time(std::chrono::steady_clock::now()) {
  if (tokenizer != nullptr)
    decoder = std::make_unique<StreamingDecoder>(*tokenizer, request.skip_special_tokens);
  if (request.json_object) json.emplace();
}

}  // namespace oscar
