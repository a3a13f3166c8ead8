// oscar bench calibrate: how long `oscar calibrate` takes at a real model shape. Random bf16
// weights of a models/hf-configs shape and random token ids stand in for a checkpoint and its
// calibration text (the work does not depend on the values): both passes over the calibration
// tokens, the float64 covariances, the eigendecompositions and the held-out error report.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <random>

#include "calibration/calibrate.h"
#include "cli/bench_gpu_common.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "cli/run_record.h"
#include "kvcache/page_layout.h"
#include "model/model_weights.h"
#include "util/error.h"
#include "util/file_io.h"

namespace oscar::cli {
namespace {

struct BenchCalibrateOptions {
  std::string model = "qwen3-8b";
  int64_t tokens = 30000;
  int64_t sequence_length = kDefaultCalibrationSequenceTokens;
  int64_t held_out_tokens = 1024;
  ModelOptions device;  // --device and --threads only
  std::string json_path;
};

void run_bench_calibrate(const BenchCalibrateOptions& o) {
  require(o.tokens >= 16 && o.sequence_length >= 16, "--tokens and --seq-len must be at least 16");
  const ModelConfig config = hf_config(o.model);
  const auto load_start = std::chrono::steady_clock::now();
  const ModelWeights weights = make_random_model(config, 1);
  BackendOptions backend_options;
  backend_options.device = device_kind(o.device);
  backend_options.num_threads = o.device.threads;
  backend_options.kv.dtype = KvDtype::bf16;
  backend_options.capacity = capacity_for_sequences(
      backend_options.kv, std::max(o.sequence_length, o.held_out_tokens), 1, o.sequence_length);
  auto backend = make_backend(weights, backend_options);
  const double setup_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();

  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int32_t> token(0, int32_t(config.vocab_size) - 1);
  std::vector<std::vector<int32_t>> sequences;
  for (int64_t start = 0; start < o.tokens; start += o.sequence_length) {
    sequences.emplace_back(size_t(std::min(o.sequence_length, o.tokens - start)));
    for (int32_t& t : sequences.back()) t = token(rng);
  }
  std::vector<int32_t> held_out(size_t(o.held_out_tokens));
  for (int32_t& t : held_out) t = token(rng);

  CalibrationOptions options;
  options.chunk_tokens = std::min<int64_t>(o.sequence_length, 2048);
  const auto start = std::chrono::steady_clock::now();
  const CalibrationResult result = calibrate(*backend, sequences, held_out, options);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  require(result.max_orthogonality_error < 1e-4,
          "oscar bench calibrate: rotations are not orthogonal ({:.2e})",
          result.max_orthogonality_error);
  const std::string device = backend_options.device == DeviceKind::cuda ? "cuda" : "cpu";
  fmt::print(
      "calibration of {} tokens at {} shape on {}: {:.1f} s ({:.0f} tokens/s; weights and backend "
      "set up "
      "in {:.1f} s, not counted)\n",
      o.tokens, o.model, device, seconds, double(o.tokens) / seconds, setup_seconds);
  if (!o.json_path.empty()) {
    const nlohmann::json row = {{"kernel", "calibrate"},
                                {"model", o.model},
                                {"device", device},
                                {"tokens", o.tokens},
                                {"seq_len", o.sequence_length},
                                {"held_out_tokens", o.held_out_tokens},
                                {"seconds", seconds}};
    write_file_atomically(o.json_path, with_run_record({{"rows", {row}}}).dump(2) + "\n");
  }
}

}  // namespace

void register_bench_calibrate(CLI::App& bench) {
  auto o = std::make_shared<BenchCalibrateOptions>();
  CLI::App* command =
      bench.add_subcommand("calibrate", "Time of `oscar calibrate` at a models/hf-configs shape");
  command->add_option("--model", o->model, "a models/hf-configs name")->capture_default_str();
  command->add_option("--tokens", o->tokens, "calibration tokens")->capture_default_str();
  command->add_option("--seq-len", o->sequence_length, "tokens per calibration sequence")
      ->capture_default_str();
  command->add_option("--held-out-tokens", o->held_out_tokens, "tokens for the error report")
      ->capture_default_str();
  command->add_option("--device", o->device.device, "cpu, cuda or auto")->capture_default_str();
  command->add_option("--threads", o->device.threads, "CPU threads (0: all cores)");
  command->add_option("--json", o->json_path, "write the result as JSON");
  command->callback([o] { run_bench_calibrate(*o); });
}

}  // namespace oscar::cli
