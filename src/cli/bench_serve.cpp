// oscar bench serve: a load generator for the OpenAI-compatible server. Against a running server
// (--url), or, without --url, an in-process server over --model and the KV flags on a free port.
#include <signal.h>

#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/run_record.h"
#include "cli/serving_options.h"
#include "loadgen/latency_report.h"
#include "loadgen/load_generator.h"
#include "util/error.h"
#include "util/file_io.h"

namespace oscar::cli {
namespace {

struct BenchServeOptions {
  ServingOptions serving;  // the in-process server; --model also names the tokenizer for --url
  std::string url;
  std::string api_key;
  WorkloadOptions workload;
  int64_t concurrency = 0;
  std::string json_path;
};

nlohmann::json configuration(const BenchServeOptions& o, const WorkloadOptions& w,
                             const LoadOptions& load, const LocalServer* local) {
  nlohmann::json config = {
      {"url", load.server.url},
      {"server", local ? "in-process" : "remote"},
      {"model", load.model},
      {"num_requests", w.num_requests},
      {"concurrency", o.concurrency},  // 0: no limit
      // null: every request arrives at the start
      {"request_rate",
       std::isinf(w.request_rate) ? nlohmann::json() : nlohmann::json(w.request_rate)},
      {"input_len", w.input_tokens},
      {"output_len", w.output_tokens},
      {"len_jitter", w.length_jitter},
      {"dataset", w.text_path},
      {"seed", w.seed}};
  if (local) config["server_description"] = local->description;
  return config;
}

// The workload's warm-up request (PlannedWorkload), before the clock starts.
void warm_up(const LoadOptions& load, const PlannedRequest& request) {
  const StreamedResponse response =
      stream_completion(load.server, "/v1/completions", completion_body(request, load.model));
  require(response.ok(), "{}: the warm-up request failed: {}", load.server.url,
          response.error.empty() ? "the stream did not finish" : response.error);
}

void run_bench_serve(const BenchServeOptions& o) {
  ::signal(SIGPIPE, SIG_IGN);  // a server that closes a connection must not end the benchmark
  require(o.concurrency >= 0, "--concurrency must be 0 (no limit) or positive");
  std::unique_ptr<LocalServer> local;
  std::unique_ptr<Tokenizer> remote_tokenizer;
  const Tokenizer* tokenizer = nullptr;
  LoadOptions load;
  load.concurrency = o.concurrency;
  if (o.url.empty()) {
    HttpServerOptions http;
    http.port = 0;
    http.api_key = o.api_key;
    local = start_local_server(o.serving, http);
    tokenizer = local->session.tokenizer.get();
    load.server = {local->server->url(), o.api_key};
    fmt::print(stderr, "[oscar] in-process server on {} ({})\n", local->server->url(),
               local->description);
  } else {
    remote_tokenizer =
        std::make_unique<Tokenizer>(Tokenizer::load(model_dir_or_default(o.serving.model)));
    tokenizer = remote_tokenizer.get();
    load.server = {o.url, o.api_key};
  }
  load.model = served_model_id(load.server);
  WorkloadOptions workload = o.workload;
  if (workload.text_path.empty()) workload.text_path = default_model_dir() + "/valid.xz";
  const PlannedWorkload plan = plan_workload(workload, *tokenizer);
  warm_up(load, plan.warm_up);
  const LoadReport report = summarize(run_load(plan.requests, load));
  fmt::print(
      "{} requests to {} ({}): input {} tokens, output {} tokens, jitter {}, concurrency {}, rate "
      "{}\n",
      workload.num_requests, load.server.url, load.model, workload.input_tokens,
      workload.output_tokens, workload.length_jitter,
      o.concurrency > 0 ? std::to_string(o.concurrency) : "unlimited",
      std::isinf(workload.request_rate) ? "inf" : fmt::format("{}/s", workload.request_rate));
  fmt::print("{}", format_table(report));
  if (!o.json_path.empty()) {
    nlohmann::json out = to_json(report);
    out["config"] = configuration(o, workload, load, local.get());
    write_file_atomically(o.json_path, with_run_record(out).dump(2) + "\n");
  }
  if (report.failed > 0) set_exit_code(1);
}

}  // namespace

void register_bench_serve(CLI::App& bench) {
  auto o = std::make_shared<BenchServeOptions>();
  CLI::App* command = bench.add_subcommand(
      "serve", "Load-test the OpenAI-compatible server (TTFT, ITL, throughput)");
  add_serving_options(*command, o->serving);
  command->add_option(
      "--url", o->url,
      "a running server, e.g. http://127.0.0.1:8000 (default: start one in-process)");
  command->add_option("--api-key", o->api_key,
                      "sent as Authorization: Bearer KEY (and required by the in-process server)");
  command
      ->add_option("--num-requests", o->workload.num_requests,
                   "requests to send (after one warm-up request)")
      ->capture_default_str();
  command->add_option("--concurrency", o->concurrency, "requests in flight at most (0: no limit)")
      ->capture_default_str();
  command
      ->add_option("--request-rate", o->workload.request_rate,
                   "mean requests per second, Poisson arrivals (inf: all at once)")
      ->capture_default_str();
  command->add_option("--input-len", o->workload.input_tokens, "prompt tokens per request")
      ->capture_default_str();
  command
      ->add_option("--output-len", o->workload.output_tokens,
                   "generated tokens per request (EOS ignored)")
      ->capture_default_str();
  command
      ->add_option(
          "--len-jitter", o->workload.length_jitter,
          "draw each length uniformly within +-this fraction of --input-len / --output-len")
      ->capture_default_str();
  command->add_option("--dataset", o->workload.text_path,
                      "text the prompts are cut from (default: the testbed's valid.xz)");
  command->add_option("--seed", o->workload.seed, "seed of lengths, prompts and arrivals")
      ->capture_default_str();
  command->add_option("--json", o->json_path,
                      "also write the results and the configuration as JSON");
  command->callback([o] { run_bench_serve(*o); });
}

}  // namespace oscar::cli
