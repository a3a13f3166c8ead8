#pragma once
// The client side of the OpenAI-compatible API, as a load generator or a test needs it: one
// streamed request read as server-sent events, timed chunk by chunk, and the served model's id.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace oscar {

struct ServerConnection {
  std::string url;      // http://host:port
  std::string api_key;  // empty: no Authorization header
  int read_timeout_seconds = 300;
};

struct StreamedResponse {
  int http_status = 0;  // 0: no HTTP response (connection refused, timeout)
  std::string error;    // transport error, the error body of a non-200 reply, or an error event
  std::string text;     // the concatenated text of the chunks
  std::string finish_reason;   // of the final chunk; empty when none arrived
  bool done = false;           // the stream ended with "data: [DONE]"
  bool hung_up = false;        // the chunk callback asked to close the connection
  int64_t prompt_tokens = -1;  // from the usage chunk (stream_options.include_usage); -1: none
  int64_t completion_tokens = -1;
  std::vector<double> text_chunk_seconds;  // arrival of each chunk that carried text, since sending
  double seconds = 0;                      // sending to the end of the stream

  bool ok() const { return http_status == 200 && error.empty() && done && !finish_reason.empty(); }
};

// Sees each parsed chunk object; returning false closes the connection (a client going away).
using ChunkCallback = std::function<bool(const nlohmann::json& chunk)>;

// POSTs `body` (which should ask for "stream": true) to `path` (/v1/completions or
// /v1/chat/completions) and reads the event stream to its end. Never throws for HTTP or server
// errors: they are reported in the result.
StreamedResponse stream_completion(const ServerConnection& server, const std::string& path,
                                   const nlohmann::json& body, const ChunkCallback& on_chunk = {});

// The id of the first model GET /v1/models lists; throws Error when the server cannot be asked.
std::string served_model_id(const ServerConnection& server);

}  // namespace oscar
