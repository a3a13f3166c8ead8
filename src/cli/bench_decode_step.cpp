// oscar bench decode-step: the whole decode step of the CUDA backend (Backend::forward of one
// token for each of `batch` sequences, CUDA graph replay, logits copied back) on random bf16
// weights of a models/hf-configs shape, with every sequence already holding `context` tokens of
// random KV pages (fill_kv_cache_with_noise: no prefill needed). Each row compares the median step
// time with its floor, (matrix bytes + KV bytes read) / measured copy bandwidth. With
// --max-batch-context N it also finds, per KV format, the largest batch whose pages fit in the
// memory left after the weights at context N, and its decode tokens/s. --kv-band-tokens takes a
// list: one INT2 run per band length (0: no band).
//
// A bf16 row whose pages do not fit (100K x 8 of Qwen3-8B holds 118 GB, more than an 80 GB GPU)
// runs with its sequences sharing pages pairwise (the second half reading the first half's, as a
// prefix cache holds them), where that fits: each step reads the same bytes as distinct sequences
// would. A pair's pieces are half the batch apart in the decode kernel's order, waves apart at long
// contexts, so the 50 MB L2 holds no page from one to the other; --share-pages runs every bf16 row
// that way, to compare with distinct pages where both fit (docs/bench section (b)).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "backend/gpu_rank_threads.h"
#include "cli/bench_gpu_common.h"
#include "cli/commands.h"
#include "cli/tensor_parallel_options.h"
#include "kvcache/page_layout.h"
#include "model/model_weights.h"
#include "parallel/shard_plan.h"
#include "util/error.h"

#ifdef OSCAR_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace oscar::cli {
namespace {

struct BenchDecodeStepOptions {
  std::string model = "qwen3-8b";
  std::string contexts = "32768,100000";
  std::string batches = "1,4,8";
  int64_t max_batch_context = 0;
  int steps = 12;
  std::string kv_dtypes = "bf16,int2";  // the caches compared (--kv-dtypes)
  std::string scale_format = "f16";     // of the INT2 group parameters
  std::string band_tokens =
      std::to_string(kOscarBandTokens);  // INT2 band lengths (--kv-band-tokens), a run each
  bool share_pages = false;              // every bf16 row with its sequences sharing pages pairwise
  std::string json_path;
  TensorParallelOptions tensor_parallel;
};

#ifdef OSCAR_HAVE_CUDA

// Matrix bytes a decode step reads: every layer's projections and the LM head (bf16).
int64_t matrix_bytes(const ModelConfig& c) {
  const int64_t per_layer = c.hidden_size * (c.q_dim() + 2 * c.kv_dim()) +
                            c.q_dim() * c.hidden_size + 3 * c.hidden_size * c.intermediate_size;
  return 2 * (c.num_layers * per_layer + c.vocab_size * c.hidden_size);
}

struct StepResult {
  double step_ms = 0;
  double floor_ms = 0;
  int64_t bytes = 0;
};

// `distinct` < batch: the sequences share pages (fill_sequences_sharing_pages).
// `tp` ranks: each reads its share of the matrices and of the KV heads (the backend's layout).
StepResult time_steps(Backend& backend, int64_t context, int64_t batch, int64_t distinct, int steps,
                      double copy_gbps, int tp) {
  const KvCacheConfig& kv = backend.kv_config();
  const KvPageCounts capacity = backend.kv_capacity();
  KvPagePools pools(capacity);
  std::vector<SequencePages> sequences =
      distinct < batch ? fill_sequences_sharing_pages(kv, pools, context, batch, distinct)
                       : fill_sequences(kv, pools, context, batch);
  std::vector<int32_t> tokens(size_t(batch), 7);
  StepLogits logits;
  std::vector<double> milliseconds;
  for (int i = -3; i < steps; ++i) {
    std::vector<SequenceStep> step;
    for (int64_t s = 0; s < batch; ++s) {
      require(sequences[size_t(s)].reserve(1, kv, pools),
              "decode-step bench: the KV pool is too small");
      step.push_back({std::span(&tokens[size_t(s)], 1), &sequences[size_t(s)], false});
    }
    const auto start = std::chrono::steady_clock::now();
    backend.forward(step, logits);
    const auto stop = std::chrono::steady_clock::now();
    for (SequencePages& sequence : sequences) sequence.commit(1, kv, pools);
    if (i >= 0)
      milliseconds.push_back(std::chrono::duration<double, std::milli>(stop - start).count());
  }
  const ModelConfig& c = backend.model_config();
  const PageLayout& layout = backend.page_layout();
  StepResult r;
  r.step_ms = median(milliseconds);
  r.bytes =
      matrix_bytes(c) / tp + batch * c.num_layers * kv_bytes_read(kv, layout, context + steps / 2);
  r.floor_ms = double(r.bytes) / (copy_gbps * 1e9) * 1e3;
  return r;
}

// One rank's runs of one cache. With tensor parallelism the ranks are threads, one a GPU, that
// run the same steps in lockstep (their collectives meet inside each step); rank 0 prints and
// records the rows.
void run_rank(const BenchDecodeStepOptions& o, const ModelWeights& weights, const KvCacheConfig& kv,
              const GpuDescription& gpu, const std::optional<GpuGroup>& group,
              std::vector<nlohmann::json>& rows) {
  const ModelConfig& config = weights.config;
  const int tp = group ? group->world_size : 1;
  const bool leader = !group || group->rank == 0;
  auto say = [&](const std::string& text) {
    if (leader) fmt::print("{}\n", text);
  };
  const int64_t rank_kv_heads = make_shard_plan(config, tp, 0).num_kv_heads;
  const std::vector<int64_t> contexts = parse_int_list(o.contexts),
                             batches = parse_int_list(o.batches);
  const PageLayout layout = make_page_layout(kv, rank_kv_heads, config.head_dim);
  // Every page the runs below need, allocated once: the largest batch of the longest context that
  // fits (pool_bytes(n): n sequences and the one fill chunk).
  const int64_t budget = cuda_free_bytes() -
                         (matrix_bytes(config) + config.vocab_size * config.hidden_size * 2) / tp -
                         (int64_t(6) << 30);  // weights, workspace and cuBLAS
  const int64_t longest =
      std::max(*std::max_element(contexts.begin(), contexts.end()), o.max_batch_context);
  auto pool_bytes = [&](int64_t sequences) {
    return bytes_per_layer(bench_pool_capacity(kv, longest + o.steps + 4, sequences), layout) *
           config.num_layers;
  };
  const int64_t max_sequences =
      std::max<int64_t>(0, (budget - pool_bytes(0)) / (pool_bytes(1) - pool_bytes(0)));
  BackendOptions options;
  options.device = DeviceKind::cuda;
  options.kv = kv;
  options.capacity =
      bench_pool_capacity(kv, longest + o.steps + 4, std::max<int64_t>(1, max_sequences));
  options.gpu_group = group;
  auto backend = make_backend(weights, options);
  fill_kv_cache_with_noise(*backend, 3);
  say(fmt::format("{}: room for {} sequences of {} tokens{}", describe(kv), max_sequences, longest,
                  tp > 1 ? fmt::format(" on each of {} ranks", tp) : ""));
  for (const int64_t context : contexts) {
    for (const int64_t batch : batches) {
      // The pages of `distinct` sequences, and each sharing sequence's own pages past the shared
      // ones, which the fill chunk's pages (free once the sequences are filled) hold first.
      auto fits = [&](int64_t distinct) {
        KvPageCounts need = bench_pool_capacity(kv, context + o.steps + 4, distinct);
        const int64_t own_pages = (batch - distinct) * ((o.steps + 4) / kv.page_size_tokens + 2);
        need.full += std::max<int64_t>(0, own_pages - kFillChunkTokens / kv.page_size_tokens);
        return bytes_per_layer(need, layout) <= bytes_per_layer(options.capacity, layout);
      };
      const bool may_share = !kv.quantized() && batch > 1;
      const int64_t distinct =
          may_share && (o.share_pages || !fits(batch)) ? (batch + 1) / 2 : batch;
      if (!fits(distinct)) {
        say(fmt::format(
            "  context {:>7} batch {:>3}: skipped, {:.1f} GB of pages do not fit", context, batch,
            double(bytes_per_layer(bench_pool_capacity(kv, context + o.steps + 4, batch), layout) *
                   config.num_layers) /
                1e9));
        continue;
      }
      const StepResult r =
          time_steps(*backend, context, batch, distinct, o.steps, gpu.copy_gbps, tp);
      say(fmt::format(
          "  context {:>7} batch {:>3}: step {:8.3f} ms, floor {:8.3f} ms ({:.2f}x), {:.0f} "
          "tokens/s{}",
          context, batch, r.step_ms, r.floor_ms, r.step_ms / r.floor_ms,
          double(batch) / r.step_ms * 1e3,
          distinct < batch ? fmt::format(" (pages of {} sequences shared pairwise)", distinct)
                           : ""));
      if (!leader) continue;
      rows.push_back({{"kernel", "decode_step"},
                      {"kv", std::string(to_string(kv.dtype))},
                      {"kv_config", describe(kv)},
                      {"model", o.model},
                      {"tensor_parallel_size", tp},
                      {"context", context},
                      {"batch", batch},
                      {"time_us", r.step_ms * 1e3},
                      {"bytes", r.bytes},
                      {"floor_us", r.floor_ms * 1e3},
                      {"floor_ratio", r.step_ms / r.floor_ms},
                      {"tokens_per_s", double(batch) / r.step_ms * 1e3},
                      {"distinct_sequences", distinct}});
    }
  }
  if (o.max_batch_context > 0 && max_sequences > 0) {
    const StepResult r = time_steps(*backend, o.max_batch_context, max_sequences, max_sequences,
                                    o.steps, gpu.copy_gbps, tp);
    say(fmt::format("  max batch at context {}: {} sequences, step {:.3f} ms, {:.0f} tokens/s",
                    o.max_batch_context, max_sequences, r.step_ms,
                    double(max_sequences) / r.step_ms * 1e3));
    if (!leader) return;
    rows.push_back({{"kernel", "max_batch_decode"},
                    {"kv", std::string(to_string(kv.dtype))},
                    {"kv_config", describe(kv)},
                    {"model", o.model},
                    {"tensor_parallel_size", tp},
                    {"context", o.max_batch_context},
                    {"batch", max_sequences},
                    {"time_us", r.step_ms * 1e3},
                    {"bytes", r.bytes},
                    {"floor_us", r.floor_ms * 1e3},
                    {"tokens_per_s", double(max_sequences) / r.step_ms * 1e3}});
  }
}

void run_bench_decode_step(const BenchDecodeStepOptions& o) {
  const ModelConfig config = hf_config(o.model);
  const int tp = o.tensor_parallel.size;
  const GpuDescription gpu = describe_gpu();
  fmt::print("{} ({}), copy bandwidth {:.0f} GB/s; {}: {} layers, {:.2f} GB of matrices{}\n",
             gpu.name, gpu.driver, gpu.copy_gbps, o.model, config.num_layers,
             double(matrix_bytes(config)) / 1e9,
             tp > 1 ? fmt::format(", tensor-parallel over {} GPUs", tp) : "");
  const auto started = std::chrono::steady_clock::now();
  const ModelWeights weights = make_random_model(config, 1);
  fmt::print("random weights made in {:.1f} s\n",
             std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  // Rotations made for these weights.
  const TemporaryFile rotations(write_synthetic_oscar_rotations(weights));
  const std::vector<KvCacheConfig> caches =
      bench_kv_configs(o.kv_dtypes, parse_param_format(o.scale_format), o.band_tokens,
                       config.head_dim, rotations.path);
  std::vector<nlohmann::json> rows;
  for (const KvCacheConfig& kv : caches) {
    if (tp == 1) {
      run_rank(o, weights, kv, gpu, std::nullopt, rows);
    } else {
      // A group (and its NCCL id) for each cache's backends: an id makes one communicator.
      run_gpu_ranks_as_threads(
          tp, [&](const GpuGroup& group) { run_rank(o, weights, kv, gpu, group, rows); });
    }
    write_rows(o.json_path, gpu, rows);  // each cache's rows as soon as they exist
  }
}
#else
void run_bench_decode_step(const BenchDecodeStepOptions&) {
  fail("oscar bench decode-step: this oscar was built without the CUDA backend");
}
#endif

}  // namespace

void register_bench_decode_step(CLI::App& bench) {
  auto options = std::make_shared<BenchDecodeStepOptions>();
  CLI::App* command = bench.add_subcommand(
      "decode-step", "GPU whole decode step vs its memory floor, bf16 vs INT2");
  command->add_option("--model", options->model, "a models/hf-configs name")->capture_default_str();
  command->add_option("--contexts", options->contexts)->capture_default_str();
  command->add_option("--batches", options->batches)->capture_default_str();
  command
      ->add_option("--max-batch-context", options->max_batch_context,
                   "also time the largest batch that fits at this context")
      ->capture_default_str();
  command->add_option("--steps", options->steps)->capture_default_str();
  command
      ->add_option("--kv-dtypes", options->kv_dtypes,
                   "the caches compared: bf16, int2 or both, comma-separated")
      ->capture_default_str();
  command
      ->add_option("--kv-scale-format", options->scale_format,
                   "INT2 group parameters: f16, bf16 or q8")
      ->capture_default_str();
  command
      ->add_option(
          "--kv-band-tokens", options->band_tokens,
          "INT2: tokens behind the recent window also held at 4 bits, a list (one INT2 run each; "
          "0: no band)")
      ->capture_default_str();
  command->add_flag("--share-pages", options->share_pages,
                    "time every bf16 row with its sequences sharing pages pairwise (else only rows "
                    "that do not fit)");
  command->add_option("--json", options->json_path, "write the rows as JSON");
  add_tensor_parallel_options(*command, options->tensor_parallel);
  command->callback([options] {
    check_gpu_bench_tensor_parallel(options->tensor_parallel, hf_config(options->model),
                                    "oscar bench decode-step");
    run_bench_decode_step(*options);
  });
}

}  // namespace oscar::cli
