#include "cli/model_session.h"

#include <fmt/format.h>

#include "kvcache/page_layout.h"
#include "model/model_fingerprint.h"
#include "quant/published_rotations.h"
#include "util/error.h"

namespace oscar::cli {

ModelSession open_model(const ModelOptions& options) {
  ModelSession session;
  session.model_dir = model_dir_or_default(options);
  session.kv = kv_cache_config(options, session.model_dir);
  session.device = device_kind(options);
  session.threads = options.threads;
  session.tensor_parallel = options.tensor_parallel;
  session.weights = load_model(session.model_dir);
  validate(session.kv, session.weights.config.head_dim);
  if (!session.kv.rotations_path.empty()) check_rotations_file(session, session.kv.rotations_path);
  if (session.kv.reads_published_rotations()) {
    load_checked_published_rotations(session, session.kv.published_key_rotations_path,
                                     session.kv.published_value_rotations_path);
  }
  session.tokenizer = std::make_unique<Tokenizer>(Tokenizer::load(session.model_dir));
  for (const int64_t id : load_eos_token_ids(session.model_dir, session.weights.config)) {
    session.eos_token_ids.push_back(int32_t(id));
  }
  return session;
}

void check_rotations_file(const ModelSession& session, const std::string& path) {
  try {
    check_rotations_model(path, model_fingerprint(session.weights));
  } catch (const Error& error) {
    fail("{}. Make this model's rotations with: {}", error.what(),
         calibrate_command(session.model_dir));
  }
}

KvRotations load_checked_published_rotations(const ModelSession& session,
                                             const std::string& key_path,
                                             const std::string& value_path) {
  KvRotations rotations =
      load_published_kv_rotations(key_path, value_path, model_fingerprint(session.weights));
  fmt::print(
      stderr,
      "[oscar] warning: {} and {} are published OSCAR rotation files, which record no model "
      "hash: only their shapes ({} layers, {} KV heads, head_dim {}) were checked against {}; "
      "rotations of another model with these shapes would load without notice\n",
      key_path, value_path, rotations.num_layers, rotations.num_kv_heads, rotations.head_dim,
      session.model_dir);
  return rotations;
}

std::unique_ptr<Engine> make_engine(const ModelSession& session, KvPageCounts capacity,
                                    EngineOptions engine_options) {
  BackendOptions backend_options;
  backend_options.device = session.device;
  backend_options.kv = session.kv;
  backend_options.capacity = capacity;
  backend_options.num_threads = session.threads;
  return std::make_unique<Engine>(
      make_rank_backend(session.weights, backend_options, session.tensor_parallel),
      session.tokenizer.get(), engine_options);
}

std::string describe_kv_footprint(const KvCacheConfig& kv, const ModelConfig& model,
                                  int64_t num_tokens) {
  const PageLayout layout = make_page_layout(kv, model.num_kv_heads, model.head_dim);
  const int64_t context_128k = 128 * 1024;
  const KvPageCounts now = footprint_for_tokens(kv, num_tokens);
  const KvPageCounts at_128k = footprint_for_tokens(kv, context_128k);
  const double bytes_per_token =
      num_tokens > 0 ? double(bytes_per_layer(now, layout) * model.num_layers) / double(num_tokens)
                     : 0;
  return fmt::format(
      "{}: {:.1f} KiB/token, {:.2f} bits/element at {} tokens; {:.3f} bits/element at 128K",
      describe(kv), bytes_per_token / 1024.0, bits_per_element(layout, now, num_tokens), num_tokens,
      bits_per_element(layout, at_128k, context_128k));
}

}  // namespace oscar::cli
