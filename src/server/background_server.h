#pragma once
// The whole server (metrics, engine service, HTTP front end) serving on a thread of its own.
// `oscar serve` runs it while the main thread waits for a signal; the tests and the in-process
// `oscar bench serve` talk to it over loopback HTTP.
#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "engine/engine.h"
#include "server/engine_service.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/openai_request.h"

namespace oscar {

class BackgroundServer {
 public:
  // Binds (throws Error when the address is taken) and returns once the server accepts
  // connections. `model.tokenizer` must outlive the server.
  BackgroundServer(std::unique_ptr<Engine> engine, ServedModel model, HttpServerOptions options);
  // Stops accepting, waits for open responses to finish, then stops the engine.
  ~BackgroundServer();

  const std::string& host() const { return host_; }
  int port() const { return http_.port(); }
  std::string url() const;  // http://host:port
  EngineService& service() { return service_; }

 private:
  ServerMetrics metrics_;
  EngineService service_;
  HttpServer http_;
  std::string host_;
  std::atomic<bool> finished_{false};
  std::thread thread_;
};

}  // namespace oscar
