#include "server/background_server.h"

#include <chrono>

#include <fmt/format.h>

#include "util/error.h"

namespace oscar {

BackgroundServer::BackgroundServer(std::unique_ptr<Engine> engine, ServedModel model,
                                   HttpServerOptions options)
    : service_(std::move(engine), metrics_),
      http_(service_, metrics_, std::move(model), options),
      host_(options.host) {
  http_.bind();
  thread_ = std::thread([this] {
    http_.serve();
    finished_ = true;
  });
  // httplib's stop() does nothing until the listening loop runs, so a server stopped right after
  // it started would never stop: wait for the loop.
  while (!http_.is_running() && !finished_)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (finished_) {
    thread_.join();
    fail("the HTTP server on {}:{} stopped as it started", host_, http_.port());
  }
}

BackgroundServer::~BackgroundServer() {
  http_.stop();
  thread_.join();
}

std::string BackgroundServer::url() const {
  return fmt::format("http://{}:{}", host_, http_.port());
}

}  // namespace oscar
