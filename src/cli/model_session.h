#pragma once
// Opening a model for a subcommand: weights, tokenizer, EOS ids and the chosen KV format, and
// building an engine over them.
#include <memory>
#include <string>
#include <vector>

#include "cli/model_options.h"
#include "engine/engine.h"
#include "model/model_weights.h"
#include "quant/kv_rotations.h"
#include "tokenizer/tokenizer.h"

namespace oscar::cli {

struct ModelSession {
  std::string model_dir;
  ModelWeights weights;
  std::unique_ptr<Tokenizer> tokenizer;
  std::vector<int32_t> eos_token_ids;
  KvCacheConfig kv;
  DeviceKind device = DeviceKind::cpu;
  int threads = 0;
  TensorParallelOptions tensor_parallel;
};

// Opens the model; an OSCAR cache's rotations file must have been calibrated on it.
ModelSession open_model(const ModelOptions& options);

// Throws Error when the rotations file at `path` was made for another model, or records none; the
// message ends with the command that calibrates this one.
void check_rotations_file(const ModelSession& session, const std::string& path);

// Loads published rotation files (quant/published_rotations.h), checking their shapes against the
// model, and warns on stderr that they record no model hash: nothing more can be checked.
KvRotations load_checked_published_rotations(const ModelSession& session,
                                             const std::string& key_path,
                                             const std::string& value_path);

// With several tensor-parallel ranks, only rank 0 returns (cli/tensor_parallel_options.h).
std::unique_ptr<Engine> make_engine(const ModelSession& session, KvPageCounts capacity,
                                    EngineOptions engine_options);

// "int2 oscar g128 ...: 4.6 KiB/token, 3.12 bits/element at 1234 tokens; 2.28 at 128K"
std::string describe_kv_footprint(const KvCacheConfig& kv, const ModelConfig& model,
                                  int64_t num_tokens);

}  // namespace oscar::cli
