// oscar bench cpu: prefill and decode tokens/s of a model on the CPU backend, per KV format.
#include <algorithm>
#include <chrono>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/model_session.h"
#include "cli/run_record.h"
#include "format/documents.h"
#include "kvcache/page_layout.h"
#include "util/error.h"
#include "util/file_io.h"
#include "util/statistics.h"

namespace oscar::cli {
namespace {

struct BenchCpuOptions {
  ModelOptions model;
  int64_t prompt_tokens = 512;
  int64_t decode_tokens = 128;
  int repeats = 3;
  std::string json_path;
};

struct Rates {
  double prefill = 0;
  double decode = 0;
};

Rates measure_once(const ModelSession& session, const std::vector<int32_t>& prompt,
                   int64_t decode_tokens) {
  EngineOptions options;
  options.scheduler.max_num_seqs = 1;
  options.scheduler.prefill_chunk_tokens = kCpuPrefillChunkTokens;
  options.scheduler.max_step_tokens = kCpuPrefillChunkTokens;
  const int64_t total = int64_t(prompt.size()) + decode_tokens;
  auto engine = make_engine(
      session, capacity_for_sequences(session.kv, total, 1, kCpuPrefillChunkTokens), options);
  GenerationRequest request;
  request.prompt = prompt;
  request.sampling.temperature = 0;
  request.stop.max_tokens = decode_tokens;
  engine->submit(std::move(request));
  while (!engine->idle()) engine->step();
  const EngineCounters& c = engine->counters();
  return {double(c.prefill_only_tokens) / c.prefill_seconds,
          double(c.decode_only_tokens) / c.decode_seconds};
}

void run_bench_cpu(const BenchCpuOptions& o) {
  require(o.prompt_tokens >= 2 && o.decode_tokens >= 2 && o.repeats >= 1,
          "--prompt-tokens and --decode-tokens must be at least 2, --repeats at least 1");
  ModelOptions model_options = o.model;
  model_options.device = "cpu";
  const ModelSession session = open_model(model_options);
  // A real prompt: validation text of the shipped testbed, tokenized and cut to length.
  std::string text;
  for (const auto& document : read_documents(default_model_dir() + "/valid.xz")) {
    text += document;
    if (text.size() > size_t(o.prompt_tokens) * 8) break;
  }
  std::vector<int32_t> prompt = session.tokenizer->encode(text);
  require(int64_t(prompt.size()) >= o.prompt_tokens, "not enough text for a {}-token prompt",
          o.prompt_tokens);
  prompt.resize(size_t(o.prompt_tokens));
  std::vector<double> prefill, decode;
  measure_once(session, prompt, 8);  // warm-up: page faults, thread pool
  for (int r = 0; r < o.repeats; ++r) {
    const Rates rates = measure_once(session, prompt, o.decode_tokens);
    prefill.push_back(rates.prefill);
    decode.push_back(rates.decode);
  }
  const ModelConfig& model = session.weights.config;
  fmt::print("model {} ({:.1f}M parameters), {} threads, KV {}\n", session.model_dir,
             double(model.parameter_count()) / 1e6,
             session.threads > 0 ? session.threads : omp_threads(), describe(session.kv));
  fmt::print("prefill {} tokens: {:.1f} tok/s (median of {})\n", o.prompt_tokens, median(prefill),
             o.repeats);
  fmt::print("decode {} tokens after the prompt: {:.1f} tok/s\n", o.decode_tokens, median(decode));
  if (!o.json_path.empty()) {
    const nlohmann::json row = {{"model", session.model_dir},
                                {"kv", describe(session.kv)},
                                {"prompt_tokens", o.prompt_tokens},
                                {"decode_tokens", o.decode_tokens},
                                {"prefill_tokens_per_s", median(prefill)},
                                {"decode_tokens_per_s", median(decode)},
                                {"prefill_runs", prefill},
                                {"decode_runs", decode}};
    write_file_atomically(o.json_path, with_run_record(row).dump(2) + "\n");
  }
}

}  // namespace

void register_bench_cpu(CLI::App& bench) {
  auto options = std::make_shared<BenchCpuOptions>();
  CLI::App* command = bench.add_subcommand("cpu", "Prefill and decode tokens/s on the CPU backend");
  add_model_options(*command, options->model);
  command->add_option("--prompt-tokens", options->prompt_tokens)->capture_default_str();
  command->add_option("--decode-tokens", options->decode_tokens)->capture_default_str();
  command->add_option("--repeats", options->repeats)->capture_default_str();
  command->add_option("--json", options->json_path, "also write the result as JSON");
  command->callback([options] { run_bench_cpu(*options); });
}

}  // namespace oscar::cli
