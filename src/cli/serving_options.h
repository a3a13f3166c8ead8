#pragma once
// The engine side of a server, shared by `oscar serve` and the in-process server of
// `oscar bench serve`: model and KV flags, batch and pool sizes, context limit; and starting it.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/model_session.h"
#include "cli/step_token_options.h"
#include "server/background_server.h"

namespace oscar::cli {

struct ServingOptions {
  ModelOptions model;
  int64_t max_num_seqs = 64;
  std::optional<double> kv_pool_gb;
  double kv_pool_fraction = 0.5;
  int64_t max_model_len = 0;  // 0: the model's
  StepTokenOptions step_tokens;
  std::string served_model_name;   // empty: the model directory's name
  std::string chat_template_file;  // empty: the checkpoint's own template (or the built-in layout)
};

void add_serving_options(CLI::App& command, ServingOptions& options);

// A server and the model it serves; the session is declared first so that it outlives the
// server, whose engine reads its weights and tokenizer.
struct LocalServer {
  ModelSession session;
  std::unique_ptr<BackgroundServer> server;
  std::string model_name;   // the id in the API
  std::string description;  // device, KV format, pool pages, limits
};

// Opens the model and serves it on a thread of its own.
std::unique_ptr<LocalServer> start_local_server(const ServingOptions& options,
                                                HttpServerOptions http);

}  // namespace oscar::cli
