#include "server/http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include <fmt/format.h>

#include "server/api_error.h"
#include "util/error.h"

namespace oscar {
namespace {

using nlohmann::json;

void send_error(httplib::Response& res, const ApiError& error) {
  res.status = error.status();
  res.set_content(error.to_json(), "application/json");
}

std::string sse(const json& value) {
  return "data: " + to_json_text(value) + "\n\n";
}

using Streams = std::vector<std::shared_ptr<RequestStream>>;

std::vector<ResponseBuilder> builders_for(const ApiRequest& request, const ServedModel& model) {
  std::vector<ResponseBuilder> builders;
  for (size_t i = 0; i < request.choices(); ++i) builders.emplace_back(request, model, i);
  return builders;
}

void cancel_all(EngineService& service, const Streams& streams) {
  for (const auto& stream : streams) service.cancel(stream->id());
}

// Streams a request's chunks as server-sent events, its choices' as they come; a client that goes
// away cancels the request (its pages return to the pool at the engine's next step).
void stream_response(httplib::Response& res, EngineService& service, Streams streams,
                     std::shared_ptr<ApiRequest> request, const ServedModel& model) {
  auto builders = std::make_shared<std::vector<ResponseBuilder>>(builders_for(*request, model));
  auto finished = std::make_shared<std::vector<bool>>(streams.size(), false);
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [&service, streams, request, builders, finished](size_t, httplib::DataSink& sink) {
        while (true) {
          // One choice: wait on it. Several: take what each has, then wait a little on the first
          // one still running.
          std::string events;
          bool received = false;
          auto take = [&](size_t i, std::chrono::milliseconds wait) {
            for (auto output = streams[i]->next(wait); output;
                 output = streams[i]->next(std::chrono::milliseconds(0))) {
              received = true;
              if (const auto chunk = (*builders)[i].chunk(*output)) events += sse(*chunk);
              if (output->finished) {
                if (output->finish_reason == FinishReason::error) {
                  events += sse(ApiError(500, "internal_error", output->error).to_json());
                }
                (*finished)[i] = true;
                return;
              }
            }
          };
          const auto running = std::find(finished->begin(), finished->end(), false);
          take(size_t(running - finished->begin()),
               std::chrono::milliseconds(streams.size() == 1 ? 200 : 20));
          for (size_t i = 0; i < streams.size(); ++i) {
            if (!(*finished)[i]) take(i, std::chrono::milliseconds(0));
          }
          const bool done = std::find(finished->begin(), finished->end(), false) == finished->end();
          if (done) {
            if (request->include_usage) events += sse(ResponseBuilder::usage_chunk(*builders));
            events += "data: [DONE]\n\n";
          }
          if (!received && !sink.is_writable()) {
            cancel_all(service, streams);
            return false;
          }
          if (!events.empty() && !sink.write(events.data(), events.size())) {
            cancel_all(service, streams);
            return false;
          }
          if (done) {
            sink.done();
            return true;
          }
        }
      },
      [&service, streams](bool success) {
        if (!success) cancel_all(service, streams);
      });
}

void complete_response(httplib::Response& res, EngineService& service, const Streams& streams,
                       const ApiRequest& request, const ServedModel& model) {
  std::vector<ResponseBuilder> builders = builders_for(request, model);
  for (size_t i = 0; i < streams.size(); ++i) {
    while (true) {
      const auto output = streams[i]->next(std::chrono::milliseconds(1000));
      if (!output) continue;
      builders[i].add(*output);
      if (!output->finished) continue;
      if (output->finish_reason == FinishReason::error) {
        cancel_all(service, streams);  // the other choices need not run on
        send_error(res, ApiError(500, "internal_error", output->error));
        return;
      }
      break;
    }
  }
  res.set_content(to_json_text(ResponseBuilder::response(builders)), "application/json");
}

}  // namespace

HttpServer::HttpServer(EngineService& service, ServerMetrics& metrics, ServedModel model,
                       HttpServerOptions options)
    : service_(service),
      metrics_(metrics),
      model_(std::move(model)),
      options_(std::move(options)),
      server_(std::make_unique<httplib::Server>()) {
  const int threads = options_.threads;
  server_->new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
  server_->set_payload_max_length(options_.max_request_bytes);
  // httplib 0.11's default socket options set SO_REUSEPORT, with which a second server binds a
  // port already in use and the kernel splits the connections between the two. SO_REUSEADDR
  // alone lets a restart bind while old connections sit in TIME_WAIT, and a taken port fails.
  server_->set_socket_options([this](int socket) {
    const int yes = 1;
    ::setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    listening_socket_ = socket;
  });
  server_->set_read_timeout(30, 0);
  server_->set_write_timeout(30, 0);
  register_routes();
}

HttpServer::~HttpServer() = default;

void HttpServer::register_routes() {
  auto authorized = [this](const httplib::Request& req, httplib::Response& res) {
    if (options_.api_key.empty() ||
        req.get_header_value("Authorization") == "Bearer " + options_.api_key) {
      return true;
    }
    send_error(res, ApiError(401, "authentication_error",
                             "missing or wrong API key (Authorization: Bearer ...)"));
    return false;
  };
  auto generate = [this, authorized](Endpoint endpoint) {
    return [this, authorized, endpoint](const httplib::Request& req, httplib::Response& res) {
      if (!authorized(req, res)) return;
      try {
        auto request = std::make_shared<ApiRequest>(parse_api_request(req.body, endpoint, model_));
        std::vector<GenerationRequest> choices;
        for (size_t i = 0; i < request->choices(); ++i) choices.push_back(request->for_choice(i));
        Streams streams =
            service_.submit(std::move(choices));  // a choice the engine refuses fails them all
        if (request->stream) {
          stream_response(res, service_, std::move(streams), request, model_);
        } else {
          complete_response(res, service_, streams, *request, model_);
        }
      } catch (const ApiError& error) {
        send_error(res, error);
      }
    };
  };
  server_->Post("/v1/completions", generate(Endpoint::completions));
  server_->Post("/v1/chat/completions", generate(Endpoint::chat_completions));
  auto tokenizer_route = [this,
                          authorized](json (*respond)(const std::string&, const ServedModel&)) {
    return [this, authorized, respond](const httplib::Request& req, httplib::Response& res) {
      if (!authorized(req, res)) return;
      try {
        res.set_content(to_json_text(respond(req.body, model_)), "application/json");
      } catch (const ApiError& error) {
        send_error(res, error);
      }
    };
  };
  server_->Post("/tokenize", tokenizer_route(tokenize_response));
  server_->Post("/detokenize", tokenizer_route(detokenize_response));
  server_->Get("/v1/models",
               [this, authorized](const httplib::Request& req, httplib::Response& res) {
                 if (!authorized(req, res)) return;
                 const json model = {{"id", model_.name},
                                     {"object", "model"},
                                     {"created", 0},
                                     {"owned_by", "oscar"},
                                     {"max_model_len", model_.max_model_len}};
                 res.set_content(to_json_text({{"object", "list"}, {"data", json::array({model})}}),
                                 "application/json");
               });
  // 503 once the backend can run no more steps (a tensor-parallel rank died), as vLLM's /health
  // fails when its engine is dead, so that an orchestrator restarts the replica.
  server_->Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const std::string failure = service_.snapshot().backend_failure;
    if (failure.empty()) {
      res.set_content("{\"status\":\"ok\"}", "application/json");
      return;
    }
    res.status = 503;
    res.set_content(to_json_text({{"status", "error"}, {"error", failure}}), "application/json");
  });
  server_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.render(service_.snapshot(), model_.name), "text/plain; version=0.0.4");
  });
  // httplib 0.11 holds a body to the size limit only when it announces its length: a chunked body
  // (or one read until the connection closes) would be buffered whole, however large. Every
  // OpenAI client sends a Content-Length, so a body without one is refused before it is read.
  server_->set_pre_routing_handler([](const httplib::Request& req, httplib::Response& res) {
    const bool may_have_body =
        req.method != "GET" && req.method != "HEAD" && req.method != "OPTIONS";
    if (!may_have_body ||
        (req.has_header("Content-Length") && !req.has_header("Transfer-Encoding"))) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    send_error(
        res,
        ApiError(411, "invalid_request_error",
                 "send the request body with a Content-Length (chunked bodies are not accepted)"));
    res.set_header("Connection",
                   "close");  // the unread body must not be taken for the next request
    return httplib::Server::HandlerResponse::Handled;
  });
  server_->set_error_handler([](const httplib::Request&, httplib::Response& res) {
    // Errors httplib raises itself (404 route, 413 body too large, 400 malformed HTTP) as JSON.
    if (!res.body.empty()) return;
    const int status = res.status;
    const std::string message = status == 413   ? "the request body is too large"
                                : status == 404 ? "no such route"
                                                : fmt::format("HTTP error {}", status);
    res.set_content(
        ApiError(status, status == 404 ? "not_found" : "invalid_request_error", message).to_json(),
        "application/json");
  });
  server_->set_exception_handler([](const httplib::Request&, httplib::Response& res,
                                    std::exception_ptr error) {
    send_error(res, ApiError(500, "internal_error", exception_message(error, "internal error")));
  });
}

void HttpServer::bind() {
  if (options_.port == 0) {
    port_ = server_->bind_to_any_port(options_.host);
    require(port_ > 0, "cannot bind {}: no free port", options_.host);
  } else {
    require(server_->bind_to_port(options_.host, options_.port),
            "cannot bind {}:{} (in use, or not allowed)", options_.host, options_.port);
    port_ = options_.port;
  }
  // httplib 0.11 listens with a backlog of 5: a burst of clients (64 streams opening at once)
  // overflows it, and some of the connections then fail. Listening again on the bound socket
  // raises the backlog in place.
  require(::listen(listening_socket_, SOMAXCONN) == 0, "cannot listen on {}:{}", options_.host,
          port_);
}

void HttpServer::serve() {
  server_->listen_after_bind();
}

void HttpServer::stop() {
  server_->stop();
}

bool HttpServer::is_running() const {
  return server_->is_running();
}

}  // namespace oscar
