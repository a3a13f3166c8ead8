#pragma once
// The OpenAI-compatible HTTP front end over an EngineService (cpp-httplib):
//   POST /v1/completions, POST /v1/chat/completions (JSON, or server-sent events with stream)
//   GET /v1/models, /health, /metrics
#include <cstdint>
#include <memory>
#include <string>

#include "server/engine_service.h"
#include "server/metrics.h"
#include "server/openai_response.h"

namespace httplib {
class Server;
}

namespace oscar {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                      // 0: any free port (see HttpServer::port())
  std::string api_key;                  // empty: no authentication
  size_t max_request_bytes = 8u << 20;  // larger bodies get 413
  int threads = 72;                     // connections served at once (each stream holds one)
};

class HttpServer {
 public:
  HttpServer(EngineService& service, ServerMetrics& metrics, ServedModel model,
             HttpServerOptions options);
  ~HttpServer();

  // Binds (throws Error when the address is taken), then serves until stop().
  void bind();
  void serve();
  void stop();
  bool is_running() const;  // the listening loop runs (stop() before that does nothing)
  int port() const { return port_; }

 private:
  void register_routes();

  EngineService& service_;
  ServerMetrics& metrics_;
  ServedModel model_;
  HttpServerOptions options_;
  std::unique_ptr<httplib::Server> server_;
  int listening_socket_ = -1;
  int port_ = 0;
};

}  // namespace oscar
