// oscar serve: the OpenAI-compatible server.
#include <signal.h>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/serving_options.h"

namespace oscar::cli {
namespace {

struct ServeOptions {
  ServingOptions serving;
  HttpServerOptions http;
};

void run_serve(const ServeOptions& o) {
  // Blocked before any thread starts (every thread inherits the mask), so that SIGINT/SIGTERM
  // reach only the sigwait below: httplib's stop() is not async-signal-safe.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  const std::unique_ptr<LocalServer> local = start_local_server(o.serving, o.http);
  fmt::print(stderr, "[oscar] serving {} on {} ({})\n", local->model_name, local->server->url(),
             local->description);
  int signal_number = 0;
  sigwait(&signals, &signal_number);
  fmt::print(stderr, "[oscar] stopping: open responses finish first\n");
}

}  // namespace

void register_serve(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App* command = app.add_subcommand("serve", "Serve the OpenAI-compatible API");
  add_serving_options(*command, o->serving);
  command->add_option("--host", o->http.host, "address to bind (loopback unless told otherwise)")
      ->capture_default_str();
  command->add_option("--port", o->http.port, "port (0: any free port)")->capture_default_str();
  command->add_option("--api-key", o->http.api_key, "require Authorization: Bearer KEY on /v1");
  command
      ->add_option("--max-request-bytes", o->http.max_request_bytes,
                   "request body limit (413 above)")
      ->capture_default_str();
  command->callback([o] { run_serve(*o); });
}

}  // namespace oscar::cli
