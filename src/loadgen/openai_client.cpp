#include "loadgen/openai_client.h"

#include <httplib.h>

#include <chrono>

#include "util/error.h"

namespace oscar {
namespace {

using nlohmann::json;

httplib::Client make_client(const ServerConnection& server) {
  httplib::Client client(server.url);
  client.set_connection_timeout(10, 0);
  client.set_read_timeout(server.read_timeout_seconds, 0);
  if (!server.api_key.empty()) client.set_bearer_token_auth(server.api_key);
  return client;
}

// Reads the server-sent events of one completion stream as they arrive.
class EventStreamReader {
 public:
  EventStreamReader(StreamedResponse& result, const ChunkCallback& on_chunk,
                    std::chrono::steady_clock::time_point sent)
      : result_(result), on_chunk_(on_chunk), sent_(sent) {}

  // False once the callback asked to hang up.
  bool feed(const char* data, size_t size) {
    buffer_.append(data, size);
    size_t end = 0;
    while ((end = buffer_.find("\n\n")) != std::string::npos) {
      const std::string event = buffer_.substr(0, end);
      buffer_.erase(0, end + 2);
      if (!handle_event(event)) return false;
    }
    return true;
  }

 private:
  bool handle_event(const std::string& event) {
    size_t start = 0;
    while (start < event.size()) {
      size_t end = event.find('\n', start);
      if (end == std::string::npos) end = event.size();
      const std::string line = event.substr(start, end - start);
      start = end + 1;
      if (line.rfind("data: ", 0) != 0) continue;  // comments, event names
      const std::string payload = line.substr(6);
      if (payload == "[DONE]") {
        result_.done = true;
        continue;
      }
      const json chunk = json::parse(payload, nullptr, /*allow_exceptions=*/false);
      if (chunk.is_discarded() || !chunk.is_object()) {
        result_.error = "a stream event is not a JSON object: " + payload;
        continue;
      }
      record(chunk);
      if (on_chunk_ && !on_chunk_(chunk)) {
        result_.hung_up = true;
        return false;
      }
    }
    return true;
  }

  void record(const json& chunk) {
    if (chunk.contains("error")) result_.error = chunk["error"].dump();
    if (const auto usage = chunk.find("usage"); usage != chunk.end() && usage->is_object()) {
      result_.prompt_tokens = usage->value("prompt_tokens", int64_t{-1});
      result_.completion_tokens = usage->value("completion_tokens", int64_t{-1});
    }
    const auto choices = chunk.find("choices");
    if (choices == chunk.end() || !choices->is_array() || choices->empty()) return;
    const json& choice = (*choices)[0];
    std::string text;
    if (choice.contains("text") && choice["text"].is_string())
      text = choice["text"].get<std::string>();
    if (const auto delta = choice.find("delta");
        delta != choice.end() && delta->contains("content") && (*delta)["content"].is_string()) {
      text = (*delta)["content"].get<std::string>();
    }
    if (!text.empty()) {
      result_.text += text;
      result_.text_chunk_seconds.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - sent_).count());
    }
    if (choice.contains("finish_reason") && choice["finish_reason"].is_string()) {
      result_.finish_reason = choice["finish_reason"].get<std::string>();
    }
  }

  StreamedResponse& result_;
  const ChunkCallback& on_chunk_;
  std::chrono::steady_clock::time_point sent_;
  std::string buffer_;
};

}  // namespace

StreamedResponse stream_completion(const ServerConnection& server, const std::string& path,
                                   const json& body, const ChunkCallback& on_chunk) {
  StreamedResponse result;
  httplib::Client client = make_client(server);
  httplib::Request request;
  request.method = "POST";
  request.path = path;
  request.body = body.dump();
  request.set_header("Content-Type", "application/json");
  request.set_header("Accept", "text/event-stream");
  httplib::Response response;
  std::string error_body;  // httplib hands a non-200 body to the receiver too
  const auto sent = std::chrono::steady_clock::now();
  EventStreamReader reader(result, on_chunk, sent);
  request.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    if (response.status != 200) {
      error_body.append(data, size);
      return true;
    }
    return reader.feed(data, size);
  };
  httplib::Error transport = httplib::Error::Success;
  const bool sent_ok = client.send(request, response, transport);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
  result.http_status = response.status > 0 ? response.status : 0;
  if (result.http_status != 200 && result.http_status != 0) {
    result.error = error_body.empty() ? "HTTP " + std::to_string(result.http_status) : error_body;
  } else if (!sent_ok && !result.hung_up) {
    result.error = "HTTP request failed: " + httplib::to_string(transport);
  }
  return result;
}

std::string served_model_id(const ServerConnection& server) {
  httplib::Client client = make_client(server);
  const httplib::Result response = client.Get("/v1/models");
  require(bool(response), "{}: cannot reach the server ({})", server.url,
          httplib::to_string(response.error()));
  require(response->status == 200, "{}/v1/models: HTTP {}: {}", server.url, response->status,
          response->body);
  const json models = json::parse(response->body, nullptr, false);
  require(models.is_object() && models.contains("data") && models["data"].is_array() &&
              !models["data"].empty() && models["data"][0].contains("id") &&
              models["data"][0]["id"].is_string(),
          "{}/v1/models: no model in the reply: {}", server.url, response->body);
  return models["data"][0]["id"].get<std::string>();
}

}  // namespace oscar
