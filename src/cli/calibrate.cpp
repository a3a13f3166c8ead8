// oscar calibrate: compute OSCAR rotations for a model from calibration text.
#include <fmt/format.h>

#include <algorithm>
#include <random>

#include "calibration/calibrate.h"
#include "cli/commands.h"
#include "cli/model_session.h"
#include "format/documents.h"
#include "kvcache/page_layout.h"
#include "model/model_fingerprint.h"
#include "tokenizer/corpus.h"
#include "util/error.h"

namespace oscar::cli {
namespace {

struct CalibrateOptions {
  std::string model_dir;
  std::vector<std::string> data;
  std::string output;
  int64_t tokens = 30000;
  int64_t sequence_length = kDefaultCalibrationSequenceTokens;
  int64_t held_out_tokens = 1024;
  bool per_layer = false;
  uint64_t seed = 0;
  std::string device = "auto";
  int threads = 0;
  int group_size = 128;
  float clip_k = 0.96f;
  float clip_v = 0.92f;
  std::string scale_format = "f16";
};

// The testbed's calibration text: 400 documents of English technical documentation and C source.
std::string default_calibration_text() {
  return default_model_dir() + "/calib.xz";
}

void run_calibrate(const CalibrateOptions& o) {
  require(o.tokens >= 16 && o.sequence_length >= 16, "--tokens and --seq-len must be at least 16");
  ModelOptions model_options;
  model_options.model_dir = o.model_dir;
  model_options.device = o.device;
  model_options.threads = o.threads;
  const ModelSession session = open_model(model_options);  // bf16 cache, no rotation
  const std::string output =
      o.output.empty() ? default_rotations_path(session.model_dir) : o.output;

  std::vector<std::string> documents;
  for (const std::string& path :
       o.data.empty() ? std::vector{default_calibration_text()} : o.data) {
    auto more = read_documents(path);
    documents.insert(documents.end(), std::make_move_iterator(more.begin()),
                     std::make_move_iterator(more.end()));
  }
  std::mt19937_64 rng(o.seed);
  std::shuffle(documents.begin(), documents.end(), rng);
  const int32_t separator = session.eos_token_ids.empty() ? 0 : session.eos_token_ids.front();
  const auto stream =
      tokenize_documents(*session.tokenizer, documents, separator, o.tokens + o.held_out_tokens);
  require(int64_t(stream.size()) > o.tokens,
          "--data holds {} tokens; --tokens {} plus held-out text needs more", stream.size(),
          o.tokens);
  std::vector<std::vector<int32_t>> sequences;
  for (int64_t start = 0; start < o.tokens; start += o.sequence_length) {
    const int64_t end = std::min(o.tokens, start + o.sequence_length);
    sequences.emplace_back(stream.begin() + long(start), stream.begin() + long(end));
  }
  const std::vector<int32_t> held_out(stream.begin() + long(o.tokens), stream.end());

  BackendOptions backend_options;
  backend_options.device = session.device;
  backend_options.kv = session.kv;
  backend_options.num_threads = o.threads;
  backend_options.capacity = capacity_for_sequences(
      session.kv, std::max(o.sequence_length, int64_t(held_out.size())), 1, o.sequence_length);
  auto backend = make_backend(session.weights, backend_options);
  CalibrationOptions options;
  options.per_head = !o.per_layer;
  options.group_size = o.group_size;
  options.clip_ratio_k = o.clip_k;
  options.clip_ratio_v = o.clip_v;
  options.param_format = parse_param_format(o.scale_format);
  options.chunk_tokens = std::min<int64_t>(o.sequence_length, 2048);
  CalibrationResult result = calibrate(*backend, sequences, held_out, options);
  record_model(model_fingerprint(session.weights), result.rotations);
  save_kv_rotations(output, result.rotations);

  fmt::print("wrote {}: {} rotations per layer, {} calibration tokens, max |R R^T - I| = {:.2e}\n",
             output, result.rotations.per_head ? "per-KV-head" : "one shared",
             result.calibration_tokens, result.max_orthogonality_error);
  fmt::print(
      "held-out attention error at INT{} g{} (clip {:.2f}/{:.2f}), {} tokens, OSCAR vs Hadamard "
      "only:\n",
      options.bits, options.group_size, options.clip_ratio_k, options.clip_ratio_v,
      held_out.size());
  fmt::print(
      "| layer | logits OSCAR | logits Hadamard | outputs OSCAR | outputs Hadamard "
      "|\n|---|---|---|---|---|\n");
  for (size_t layer = 0; layer < result.layers.size(); ++layer) {
    const LayerErrorReport& e = result.layers[layer];
    fmt::print("| {} | {:.4f} | {:.4f} | {:.4f} | {:.4f} |\n", layer, e.oscar_logits,
               e.hadamard_logits, e.oscar_outputs, e.hadamard_outputs);
  }
}

}  // namespace

void register_calibrate(CLI::App& app) {
  auto o = std::make_shared<CalibrateOptions>();
  CLI::App* command =
      app.add_subcommand("calibrate", "Compute OSCAR key/value rotations from calibration text");
  command->add_option("--model", o->model_dir, "model directory (default: the testbed model)");
  command->add_option(
      "--data", o->data,
      "calibration text: .xz (0x1e-separated), .jsonl or plain text (default: the testbed's "
      "calib.xz, English technical documentation and C source; text of the model's own "
      "domain calibrates it best)");
  command->add_option(
      "--out", o->output,
      fmt::format("rotations file to write (default: {} in the model directory, where the "
                  "other commands look for it)",
                  kRotationsFileName));
  command->add_option("--tokens", o->tokens, "calibration tokens")->capture_default_str();
  command->add_option("--seq-len", o->sequence_length, "tokens per calibration sequence")
      ->capture_default_str();
  command->add_option("--held-out-tokens", o->held_out_tokens, "tokens for the error report")
      ->capture_default_str();
  command->add_flag("--per-layer,!--per-head", o->per_layer,
                    "one rotation per layer (averaged over KV heads) instead of one per KV head");
  command->add_option("--seed", o->seed, "document shuffling seed")->capture_default_str();
  command->add_option("--device", o->device, "cpu, cuda or auto")->capture_default_str();
  command->add_option("--threads", o->threads, "CPU threads (0: all cores)");
  command
      ->add_option("--kv-group-size", o->group_size, "group size recorded and used for the report")
      ->capture_default_str();
  command->add_option("--kv-clip-k", o->clip_k)->capture_default_str();
  command->add_option("--kv-clip-v", o->clip_v)->capture_default_str();
  command->add_option("--kv-scale-format", o->scale_format)->capture_default_str();
  command->callback([o] { run_calibrate(*o); });
}

}  // namespace oscar::cli
