#pragma once
// Flags shared by the subcommands that run a model: --model, --device, --threads, every --kv-*
// flag and the tensor-parallel flags, registered once here so that generate, eval, bench and serve
// agree.
#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "backend/backend.h"
#include "cli/tensor_parallel_options.h"
#include "kvcache/kv_cache_config.h"

namespace oscar::cli {

struct ModelOptions {
  std::string model_dir;
  std::string device = "auto";
  int threads = 0;
  std::string kv_dtype = "bf16";
  std::optional<std::string> kv_method;  // default: oscar for int2 and int4, else naive
  std::string kv_rotations;              // default: kRotationsFileName beside the model (oscar)
  std::string kv_rotations_k;            // published RotationZoo files (torch.save), instead
  std::string kv_rotations_v;
  std::optional<std::string> kv_preset;  // oscar-published: the whole quantizer from the paper
  int kv_group_size = 128;
  std::optional<std::string> kv_scale_format;  // default: q8 for oscar, f16 otherwise
  std::optional<float> kv_clip_k;
  std::optional<float> kv_clip_v;
  bool kv_clip_search = false;  // fixed ratios unless --kv-clip-search
  std::string kv_clip_mode = "range-scale";
  bool kv_lloyd_max = false;
  std::optional<bool> kv_key_error_feedback;    // default: on for quantized oscar caches
  std::optional<bool> kv_value_error_feedback;  // default: on for quantized oscar caches
  int64_t kv_sink_tokens = 64;
  int64_t kv_recent_tokens = 256;
  std::optional<int64_t> kv_band_tokens;  // default: kOscarBandTokens for INT2 oscar caches, else 0
  std::optional<int> kv_page_size;
  TensorParallelOptions tensor_parallel;
};

void add_model_options(CLI::App& command, ModelOptions& options);

// The repository's testbed model, used when --model is not given.
std::string default_model_dir();
std::string model_dir_or_default(const ModelOptions& options);

// The cache the options choose for the model in `model_dir`. An OSCAR cache without --kv-rotations
// reads the file `oscar calibrate` writes beside the model; when that is absent, the Error holds
// the command that makes it. Throws Error naming the flag at fault.
KvCacheConfig kv_cache_config(const ModelOptions& options, const std::string& model_dir);
// Where `oscar calibrate` writes a model's rotations unless told, and where the other commands
// look for them.
std::string default_rotations_path(const std::string& model_dir);
// The command line that writes them there, for this program as the user ran it.
std::string calibrate_command(const std::string& model_dir);
// The quantization settings (group parameter format, clip ratios, clip search) of `c.method`
// under the user's options.
void apply_quantization_options(const ModelOptions& options, KvCacheConfig& c);
DeviceKind device_kind(const ModelOptions& options);

}  // namespace oscar::cli
