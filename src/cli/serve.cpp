// oscar serve: the OpenAI-compatible server.
#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>

#include <filesystem>
#include <thread>

#include "cli/commands.h"
#include "cli/model_session.h"
#include "kvcache/page_layout.h"
#include "server/engine_service.h"
#include "server/http_server.h"
#include "util/error.h"

namespace oscar::cli {
namespace {

struct ServeOptions {
  ModelOptions model;
  HttpServerOptions http;
  int64_t max_num_seqs = 64;
  std::optional<double> kv_pool_gb;
  double kv_pool_fraction = 0.5;
  int64_t max_model_len = 0;
  int64_t prefill_chunk = 512;
  int64_t max_step_tokens = 2048;
  std::string served_model_name;
};

std::optional<int32_t> find_token(const Tokenizer& tokenizer, const char* text) {
  return tokenizer.token_id(text);
}

void run_serve(const ServeOptions& o) {
  require(o.max_num_seqs >= 1, "--max-num-seqs must be at least 1");
  require(o.kv_pool_fraction > 0 && o.kv_pool_fraction <= 0.95, "--kv-pool-fraction must lie in (0, 0.95]");
  const ModelSession session = open_model(o.model);
  const ModelConfig& model = session.weights.config;
  const int64_t max_model_len = o.max_model_len > 0 ? o.max_model_len : model.max_position_embeddings;
  const int64_t pool_bytes = o.kv_pool_gb ? int64_t(*o.kv_pool_gb * double(1ull << 30))
                                          : int64_t(o.kv_pool_fraction * double(device_free_bytes(session.device)));
  const PageLayout layout = make_page_layout(session.kv, model.num_kv_heads, model.head_dim);
  const KvPageCounts capacity =
      capacity_for_bytes(session.kv, layout, model.num_layers, pool_bytes, o.max_num_seqs, o.prefill_chunk);
  EngineOptions engine_options;
  engine_options.scheduler.max_num_seqs = o.max_num_seqs;
  engine_options.scheduler.prefill_chunk_tokens = o.prefill_chunk;
  engine_options.scheduler.max_step_tokens = std::max(o.max_step_tokens, o.max_num_seqs);
  engine_options.max_model_len = max_model_len;
  ServerMetrics metrics;
  EngineService service(make_engine(session, capacity, engine_options), metrics);

  ServedModel served;
  served.name = o.served_model_name.empty() ? std::filesystem::path(session.model_dir).filename().string()
                                            : o.served_model_name;
  served.tokenizer = session.tokenizer.get();
  served.chat_format = chat_format_for(model.architecture_name);
  served.eos_token_ids = session.eos_token_ids;
  served.chat_stop_token_ids = session.eos_token_ids;
  for (const char* end_of_turn : {"<|im_end|>", "<|eot_id|>"}) {
    if (const auto id = find_token(*session.tokenizer, end_of_turn)) served.chat_stop_token_ids.push_back(*id);
  }
  served.max_model_len = max_model_len;

  // SIGINT/SIGTERM stop the server from a thread of their own (httplib's stop is not signal-safe).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  HttpServerOptions http = o.http;
  http.threads = std::max<int>(http.threads, int(2 * o.max_num_seqs + 8));
  HttpServer server(service, metrics, served, http);
  server.bind();
  std::thread waiter([&] {
    int signal_number = 0;
    sigwait(&signals, &signal_number);
    server.stop();
  });
  fmt::print(stderr, "[oscar] serving {} on http://{}:{} ({}, KV {}, pool {} bf16 + {} quantized pages, {} max "
             "sequences, context {})\n",
             served.name, http.host, server.port(), session.device == DeviceKind::cuda ? "cuda" : "cpu", describe(session.kv),
             capacity.full, capacity.quantized, o.max_num_seqs, max_model_len);
  server.serve();
  pthread_kill(waiter.native_handle(), SIGTERM);
  waiter.join();
}

}  // namespace

void register_serve(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App* command = app.add_subcommand("serve", "Serve the OpenAI-compatible API");
  add_model_options(*command, o->model);
  command->add_option("--host", o->http.host, "address to bind (loopback unless told otherwise)")->capture_default_str();
  command->add_option("--port", o->http.port, "port (0: any free port)")->capture_default_str();
  command->add_option("--api-key", o->http.api_key, "require Authorization: Bearer KEY on /v1");
  command->add_option("--max-num-seqs", o->max_num_seqs, "sequences in the running batch")->capture_default_str();
  command->add_option("--kv-pool-gb", o->kv_pool_gb, "KV cache pool size in GiB");
  command->add_option("--kv-pool-fraction", o->kv_pool_fraction,
                      "KV pool as a fraction of free device memory (when --kv-pool-gb is not given)")
      ->capture_default_str();
  command->add_option("--max-model-len", o->max_model_len, "context limit (default: the model's)");
  command->add_option("--prefill-chunk", o->prefill_chunk, "prompt tokens of one sequence per step")
      ->capture_default_str();
  command->add_option("--max-step-tokens", o->max_step_tokens, "tokens per step")->capture_default_str();
  command->add_option("--served-model-name", o->served_model_name, "model id in the API (default: the directory name)");
  command->add_option("--max-request-bytes", o->http.max_request_bytes, "request body limit (413 above)")
      ->capture_default_str();
  command->callback([o] { run_serve(*o); });
}

}  // namespace oscar::cli
