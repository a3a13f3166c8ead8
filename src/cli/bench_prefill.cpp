// oscar bench prefill: the time to first token of one long prompt on the CUDA backend, on random
// bf16 weights of a models/hf-configs shape, with the bf16 cache and the INT2 cache in OSCAR's
// default layout (q8 group parameters, error feedback, the 4-bit band). Each row prefills a fresh
// sequence of L random token ids in chunks exactly as the engine runs a lone request
// (bench_prefill_schedule.h), the last chunk returning the last token's logits. It reports the TTFT
// (median of --repeats runs after a warm-up run), tokens/s, and from one more run with the
// backend's phase timing (set_forward_phase_timing) the shares of the GPU time spent in attention
// and in the linear layers and their TFLOP/s alone (the JSON rows add the KV write's time and, of
// it and of attention, the INT2 cache's quantization and dequantization, each timed run's wall
// time and GPU time, and the phase-timed run's wall time); the whole prefill's TFLOP/s are issue
// 40's count over the TTFT (bench_prefill_rows.h). With -tp N the ranks are threads, one GPU each,
// as in bench decode-step. bench/prefill_peer.py times transformers and torch's SDPA on the same
// weights, which --weight-checksums lets it check.
// --decode-batch N puts one token of each of N other sequences, at --decode-context tokens of
// noise-filled pages and growing by one a step, into every step of the prompt, as `oscar serve`
// runs its decodes beside a chunk: the lone and the mixed rows compare what the decodes cost.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <random>
#include <string>

#include "backend/gpu_rank_threads.h"
#include "cli/bench_gpu_common.h"
#include "cli/bench_prefill_rows.h"
#include "cli/bench_prefill_schedule.h"
#include "cli/bench_weight_checksums.h"
#include "cli/commands.h"
#include "cli/tensor_parallel_options.h"
#include "kvcache/page_layout.h"
#include "model/model_weights.h"
#include "parallel/shard_plan.h"
#include "util/error.h"
#include "util/file_io.h"
#include "util/statistics.h"

#ifdef OSCAR_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace oscar::cli {
namespace {

struct BenchPrefillOptions {
  std::string model = "qwen3-8b";
  std::string prompt_lens = "4096,8192,16384,32768,65536,100000,131072";
  std::string kv_dtypes = "bf16,int2";
  int64_t chunk_tokens = kGpuPrefillChunkTokens;
  int repeats = 3;
  DecodeRows decodes{0, 32768};
  std::string json_path;
  std::string weight_checksums_path;  // write the weights' checksums there instead of benchmarking
  TensorParallelOptions tensor_parallel;
};

// The random weights every oscar GPU benchmark runs (and prefill_peer.py regenerates).
constexpr uint64_t kWeightSeed = 1;

void write_weight_checksums(const BenchPrefillOptions& o, const ModelConfig& config) {
  const nlohmann::json root = {
      {"model", o.model},
      {"seed", kWeightSeed},
      {"tensors", checksums_json(weight_checksums(make_random_model(config, kWeightSeed)))}};
  write_file_atomically(o.weight_checksums_path, root.dump(1) + "\n");
  fmt::print("{}: checksums of {}'s random weights (seed {}), {} tensors\n",
             o.weight_checksums_path, o.model, kWeightSeed, root["tensors"].size());
}

#ifdef OSCAR_HAVE_CUDA

// Device memory beyond the KV pages: the weights (bf16; the embedding and the LM head both
// counted), the activations of a step of `chunk_tokens` rows, and a margin for the attention
// kernels' buffers, cuBLAS and the CUDA context.
int64_t bytes_besides_pages(const ModelConfig& c, int64_t chunk_tokens) {
  const MatrixParams params = matrix_params(c);
  const int64_t weights = 2 * (params.total() + c.vocab_size * c.hidden_size);
  const int64_t float_row =
      2 * c.hidden_size + 2 * c.q_dim() + 2 * c.kv_dim() + 2 * c.intermediate_size;
  const int64_t bf16_row = c.hidden_size + c.q_dim() + c.intermediate_size;
  const int64_t activations = chunk_tokens * (4 * float_row + 2 * bf16_row);
  return weights + activations + (int64_t(6) << 30);
}

// One prefill of `prompt` beside `decodes`, its wall time returned; its steps' GPU times, as
// `timing` has them recorded, summed into `gpu`.
double prefill_seconds(Backend& backend, const std::vector<int32_t>& prompt,
                       const SchedulerOptions& schedule, const DecodeRows& decodes,
                       PhaseTiming timing, ForwardPhaseTimes& gpu, int64_t* chunks) {
  set_forward_phase_timing(backend, timing);
  KvPagePools pools(backend.kv_capacity());
  StepLogits logits;
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int64_t> planned =
      prefill_beside_decodes(prompt, schedule, backend.kv_config(), pools, decodes,
                             [&](std::span<const SequenceStep> steps) {
                               backend.forward(steps, logits);
                               gpu += forward_phase_times(backend);
                             });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  set_forward_phase_timing(backend, PhaseTiming::off);
  // A broken kernel shows here rather than as a fast time: a row for each decode and the prompt.
  require(
      logits.rows == decodes.batch + 1 && std::all_of(logits.values.begin(), logits.values.end(),
                                                      [](float v) { return std::isfinite(v); }),
      "bench prefill: the last chunk of a {}-token prompt beside {} decode rows returned {} "
      "rows of logits, or non-finite ones",
      prompt.size(), decodes.batch, logits.rows);
  *chunks = int64_t(planned.size());
  return seconds;
}

PrefillTimes time_prefill(Backend& backend, int64_t prompt_tokens, const SchedulerOptions& schedule,
                          const DecodeRows& decodes, int repeats, int64_t* chunks) {
  std::mt19937_64 rng{uint64_t(prompt_tokens)};
  std::uniform_int_distribution<int32_t> token(0, int32_t(backend.model_config().vocab_size - 1));
  std::vector<int32_t> prompt(static_cast<size_t>(prompt_tokens));
  for (int32_t& id : prompt) id = token(rng);
  ForwardPhaseTimes warm_up;
  prefill_seconds(backend, prompt, schedule, decodes, PhaseTiming::off, warm_up, chunks);
  PrefillTimes times;
  for (int r = 0; r < repeats; ++r) {
    ForwardPhaseTimes run;
    times.runs.push_back(
        prefill_seconds(backend, prompt, schedule, decodes, PhaseTiming::total, run, chunks));
    times.gpu_runs.push_back(run.total_ms / 1e3);
  }
  ForwardPhaseTimes phases;
  times.phase_run =
      prefill_seconds(backend, prompt, schedule, decodes, PhaseTiming::phases, phases, chunks);
  times.gpu = phases.total_ms / 1e3;
  times.attention = phases.attention_ms / 1e3;
  times.linear = phases.linear_ms / 1e3;
  times.kv_write = phases.kv_write_ms / 1e3;
  times.kv_quantize = phases.kv_quantize_ms / 1e3;
  times.dequantize = phases.dequantize_ms / 1e3;
  return times;
}

// A lone request's steps: each a chunk of the prompt (Scheduler), as `oscar serve` runs it.
SchedulerOptions lone_prompt_schedule(int64_t chunk_tokens) {
  SchedulerOptions schedule;
  schedule.max_num_seqs = 1;
  schedule.prefill_chunk_tokens = chunk_tokens;
  schedule.max_step_tokens = default_max_step_tokens(DeviceKind::cuda, chunk_tokens, 1);
  return schedule;
}

// The least free memory of the GPUs of local ranks 0..tp-1, so that every rank allocates the same
// pages and skips the same prompts (a rank alone in a prefill would wait for the others).
int64_t least_free_bytes(int tp) {
  int64_t least = cuda_free_bytes();
  for (int rank = 1; rank < tp; ++rank) {
    use_gpu_of_local_rank(rank);
    least = std::min(least, cuda_free_bytes());
  }
  use_gpu_of_local_rank(0);
  return least;
}

// One rank's rows of one cache. With tensor parallelism the ranks are threads, one a GPU, that
// run the same prefills in lockstep (their collectives meet inside each step); each holds its
// share of the weights and of the KV heads. Rank 0 prints and records the rows; their work is the
// whole model's, so the TFLOP/s are those of the tp GPUs together.
void prefill_on_rank(const BenchPrefillOptions& o, const ModelWeights& weights,
                     const KvCacheConfig& kv, const std::string& device, int64_t free_bytes,
                     const std::optional<GpuGroup>& group, std::vector<nlohmann::json>& rows) {
  const ModelConfig& config = weights.config;
  const int tp = group ? group->world_size : 1;
  const bool leader = !group || group->rank == 0;
  auto say = [&](const std::string& text) {
    if (leader) fmt::print("{}", text);
  };
  const std::vector<int64_t> lengths = parse_int_list(o.prompt_lens);
  const ShardPlan plan = make_shard_plan(config, tp, group ? group->rank : 0);
  const PageLayout layout = make_page_layout(kv, plan.num_kv_heads, config.head_dim);
  auto pool_bytes = [&](int64_t tokens) {
    return bytes_per_layer(prefill_pool_capacity(kv, tokens, o.chunk_tokens, o.decodes), layout) *
           config.num_layers;
  };
  // Pages for the longest prompt that fits beside the rank's weights, allocated once.
  const int64_t room = free_bytes - bytes_besides_pages(shard_config(config, plan), o.chunk_tokens);
  int64_t longest = 0;
  for (const int64_t length : lengths) {
    if (pool_bytes(length) <= room) longest = std::max(longest, length);
  }
  say(fmt::format("{}{}\n{}", describe(kv),
                  tp > 1 ? fmt::format(", tensor-parallel over {} GPUs", tp) : "",
                  prefill_table_header()));
  if (longest == 0) {
    say(fmt::format("  skipped: no prompt's pages fit in {:.1f} GB\n", double(room) / 1e9));
    return;
  }
  BackendOptions options;
  options.device = DeviceKind::cuda;
  options.kv = kv;
  options.capacity = prefill_pool_capacity(kv, longest, o.chunk_tokens, o.decodes);
  options.gpu_group = group;
  auto backend = make_backend(weights, options);
  // The decode rows' pages hold noise: finite keys, values and quantization parameters.
  if (o.decodes.batch > 0) fill_kv_cache_with_noise(*backend, 3);
  const SchedulerOptions schedule = lone_prompt_schedule(o.chunk_tokens);
  for (const int64_t length : lengths) {
    if (length > longest) {
      say(fmt::format("{:<5} {:>7}   skipped: {:.1f} GB of pages do not fit in {:.1f} GB\n",
                      to_string(kv.dtype), length, double(pool_bytes(length)) / 1e9,
                      double(room) / 1e9));
      continue;
    }
    PrefillRowKey key{device, o.model, kv, length, o.chunk_tokens, 0, o.repeats, tp};
    key.decode_batch = o.decodes.batch;
    key.decode_context = o.decodes.context;
    const PrefillTimes times =
        time_prefill(*backend, length, schedule, o.decodes, o.repeats, &key.chunks);
    if (!leader) continue;
    rows.push_back(prefill_row(config, key, times));
    fmt::print("{}", prefill_table_line(rows.back()));
  }
}

void run_rows(const BenchPrefillOptions& o, const ModelConfig& config) {
  const int tp = o.tensor_parallel.size;
  const GpuDescription gpu = describe_gpu();
  fmt::print("{} ({}); {}: {} layers, {:.2f} B matrix parameters; chunks of {} tokens{}\n",
             gpu.name, gpu.driver, o.model, config.num_layers,
             double(matrix_params(config).total()) / 1e9, o.chunk_tokens,
             tp > 1 ? fmt::format("; tensor-parallel over {} GPUs", tp) : "");
  if (o.decodes.batch > 0) {
    fmt::print("each step also decodes {} sequences from context {}\n", o.decodes.batch,
               o.decodes.context);
  }
  const auto started = std::chrono::steady_clock::now();
  const ModelWeights weights = make_random_model(config, kWeightSeed);
  fmt::print("random weights made in {:.1f} s\n",
             std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  // Rotations made for these weights.
  const TemporaryFile rotations(write_synthetic_oscar_rotations(weights));
  // OSCAR's defaults: q8 group parameters and the band (bench_kv_configs applies the rest).
  const std::vector<KvCacheConfig> caches =
      bench_kv_configs(o.kv_dtypes, ParamFormat::q8, std::to_string(kOscarBandTokens),
                       config.head_dim, rotations.path);
  std::vector<nlohmann::json> rows;
  for (const KvCacheConfig& kv : caches) {
    const int64_t free_bytes = least_free_bytes(tp);
    if (tp == 1) {
      prefill_on_rank(o, weights, kv, gpu.name, free_bytes, std::nullopt, rows);
    } else {
      // A group (and its NCCL id) for each cache's backends: an id makes one communicator.
      run_gpu_ranks_as_threads(tp, [&](const GpuGroup& group) {
        prefill_on_rank(o, weights, kv, gpu.name, free_bytes, group, rows);
      });
    }
    write_rows(o.json_path, gpu, rows);  // each cache's rows as soon as they exist
  }
}
#else
void run_rows(const BenchPrefillOptions&, const ModelConfig&) {
  fail("oscar bench prefill: this oscar was built without the CUDA backend");
}
#endif

void run_bench_prefill(const BenchPrefillOptions& o) {
  require(o.chunk_tokens >= 1, "--chunk-tokens must be at least 1, got {}", o.chunk_tokens);
  require(o.repeats >= 1, "--repeats must be at least 1, got {}", o.repeats);
  for (const int64_t length : parse_int_list(o.prompt_lens))
    require(length >= 1, "--prompt-lens: {} is not a prompt length", length);
  require(o.decodes.batch >= 0, "--decode-batch must be at least 0, got {}", o.decodes.batch);
  require(o.decodes.context >= 1, "--decode-context must be at least 1, got {}", o.decodes.context);
  const ModelConfig config = hf_config(o.model);
  if (o.weight_checksums_path.empty()) {
    run_rows(o, config);
  } else {
    write_weight_checksums(o, config);
  }
}

}  // namespace

void register_bench_prefill(CLI::App& bench) {
  auto options = std::make_shared<BenchPrefillOptions>();
  CLI::App* command = bench.add_subcommand(
      "prefill", "GPU time to first token of one long prompt, bf16 vs INT2 cache");
  command->add_option("--model", options->model, "a models/hf-configs name")->capture_default_str();
  command
      ->add_option("--prompt-lens", options->prompt_lens,
                   "prompt lengths in tokens, comma-separated")
      ->capture_default_str();
  command
      ->add_option("--kv-dtypes", options->kv_dtypes,
                   "the caches compared: bf16, int2 or both, comma-separated")
      ->capture_default_str();
  command
      ->add_option("--chunk-tokens", options->chunk_tokens,
                   "prompt tokens per step (the engine's --prefill-chunk)")
      ->capture_default_str();
  command
      ->add_option("--repeats", options->repeats,
                   "timed prefills per row (after one warm-up), the median taken")
      ->capture_default_str();
  command
      ->add_option("--decode-batch", options->decodes.batch,
                   "sequences that also decode one token in each of the prompt's steps")
      ->capture_default_str();
  command
      ->add_option("--decode-context", options->decodes.context,
                   "tokens each decoding sequence holds at the prompt's first step")
      ->capture_default_str();
  command->add_option("--json", options->json_path, "write the rows as JSON");
  command->add_option(
      "--weight-checksums", options->weight_checksums_path,
      "only write the checksums of the random weights as JSON (for bench/prefill_peer.py)");
  add_tensor_parallel_options(*command, options->tensor_parallel);
  command->callback([options] {
    check_gpu_bench_tensor_parallel(options->tensor_parallel, hf_config(options->model),
                                    "oscar bench prefill");
    run_bench_prefill(*options);
  });
}

}  // namespace oscar::cli
