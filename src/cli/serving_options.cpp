#include "cli/serving_options.h"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "kvcache/page_layout.h"
#include "parallel/shard_plan.h"
#include "util/error.h"

namespace oscar::cli {
namespace {

constexpr int64_t kGiB = int64_t(1) << 30;
// The CPU's KV pool unless told: vLLM's CPU backend's default (VLLM_CPU_KVCACHE_SPACE). Sized from
// the machine's memory instead, it took half of it, however small the model.
constexpr int64_t kDefaultCpuPoolBytes = 4 * kGiB;

int64_t default_pool_bytes(DeviceKind device, double fraction) {
  const int64_t share = int64_t(fraction * double(device_free_bytes(device)));
  return device == DeviceKind::cpu ? std::min(kDefaultCpuPoolBytes, share) : share;
}

}  // namespace

void add_serving_options(CLI::App& command, ServingOptions& o) {
  add_model_options(command, o.model);
  command.add_option("--max-num-seqs", o.max_num_seqs, "sequences in the running batch")
      ->capture_default_str();
  command.add_option("--kv-pool-gb", o.kv_pool_gb,
                     "KV cache pool size in GiB (default: on a GPU, --kv-pool-fraction of its free "
                     "memory; on the CPU, 4 GiB or that fraction of available memory if less)");
  command
      .add_option("--kv-pool-fraction", o.kv_pool_fraction,
                  "KV pool as a fraction of free device memory (when --kv-pool-gb is not given)")
      ->capture_default_str();
  command.add_option("--max-model-len", o.max_model_len, "context limit (default: the model's)");
  add_step_token_options(command, o.step_tokens);
  command.add_option("--served-model-name", o.served_model_name,
                     "model id in the API (default: the directory name)");
  command
      .add_option(
          "--chat-template", o.chat_template_file,
          "Jinja chat template file for /v1/chat/completions (default: the checkpoint's "
          "chat_template.jinja or tokenizer_config.json chat_template, else a built-in layout)")
      ->check(CLI::ExistingFile);
}

std::unique_ptr<LocalServer> start_local_server(const ServingOptions& o, HttpServerOptions http) {
  require(o.max_num_seqs >= 1, "--max-num-seqs must be at least 1");
  require(o.kv_pool_fraction > 0 && o.kv_pool_fraction <= 0.95,
          "--kv-pool-fraction must lie in (0, 0.95]");
  auto local = std::make_unique<LocalServer>();
  local->session = open_model(o.model);
  const ModelSession& session = local->session;
  const ModelConfig& model = session.weights.config;
  const int64_t max_model_len =
      o.max_model_len > 0 ? o.max_model_len : model.max_position_embeddings;
  const int64_t pool_bytes = o.kv_pool_gb ? int64_t(*o.kv_pool_gb * double(kGiB))
                                          : default_pool_bytes(session.device, o.kv_pool_fraction);
  EngineOptions engine_options;
  engine_options.scheduler = scheduler_options(o.step_tokens, session.device, o.max_num_seqs);
  engine_options.max_model_len = max_model_len;
  // Each rank's pool holds its own KV heads (parallel/shard_plan.h): the pool's bytes are a rank's.
  const int64_t rank_kv_heads =
      make_shard_plan(model, session.tensor_parallel.size, 0).num_kv_heads;
  const PageLayout layout = make_page_layout(session.kv, rank_kv_heads, model.head_dim);
  const KvPageCounts capacity =
      capacity_for_bytes(session.kv, layout, model.num_layers, pool_bytes, o.max_num_seqs,
                         max_new_tokens_per_step(engine_options.scheduler));
  const std::string name = o.served_model_name.empty()
                               ? std::filesystem::path(session.model_dir).filename().string()
                               : o.served_model_name;
  ServedModel served = make_served_model(name, *session.tokenizer, model.architecture_name,
                                         session.eos_token_ids, max_model_len);
  use_chat_template(served, o.chat_template_file.empty()
                                ? ChatTemplate::load(session.model_dir, model.architecture_name)
                                : ChatTemplate::load_file(o.chat_template_file, session.model_dir));
  const std::string chat_template = served.chat_template.description();
  // Each open stream holds an HTTP thread: room for a full batch, as many queued, and spares.
  http.threads = std::max<int>(http.threads, int(2 * o.max_num_seqs + 8));
  local->server = std::make_unique<BackgroundServer>(make_engine(session, capacity, engine_options),
                                                     std::move(served), http);
  local->model_name = name;
  const double allocated_gib =
      double(bytes_per_layer(capacity, layout) * model.num_layers) / double(kGiB);
  local->description = fmt::format(
      "{}, KV {}, pool {:.2f} GiB: {} bf16 + {} quantized{} pages, {} max sequences, context {}, "
      "prefill chunk {}, step {} tokens, chat template {}",
      session.device == DeviceKind::cuda ? "cuda" : "cpu", describe(session.kv), allocated_gib,
      capacity.full, capacity.quantized,
      session.kv.has_band() ? fmt::format(" + {} band", capacity.band) : "", o.max_num_seqs,
      max_model_len, engine_options.scheduler.prefill_chunk_tokens,
      engine_options.scheduler.max_step_tokens, chat_template);
  return local;
}

}  // namespace oscar::cli
