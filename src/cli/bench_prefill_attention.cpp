// oscar bench prefill-attention: the prefill attention kernels alone at a model's KV shape, bf16
// pages vs INT2 pages: a whole prompt of L tokens attended chunk by chunk (each chunk's queries
// against every earlier token under the decode rule), as one layer of a chunked prefill runs it.
// Each row reports the time of all chunks (for INT2 the dequantization into scratch pages
// included, and its share), and the achieved TFLOP/s by the causal count 2 L^2 D H_q (the score
// and value products of a causal mask). Pages hold random bytes (kv_noise.h), never zeros. With a
// cache that rotates its keys (INT2 OSCAR), the tensor-core kernel reads the queries from q|k|v
// rows and rotates them by R_K itself (Hadamard rotations here), as the engine's prefill steps do.
// --kernel float runs the float kernel that KIVI's caches use, for comparison.
#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "cli/bench_attention_inputs.h"
#include "cli/bench_gpu_common.h"
#include "cli/commands.h"
#include "engine/scheduler.h"
#include "util/error.h"

#ifdef OSCAR_HAVE_CUDA
#include "backend/cuda/attention_combine.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/device_kv_pages.h"
#include "backend/cuda/device_step.h"
#include "backend/cuda/float_block_attention.h"
#include "backend/cuda/kv_noise.h"
#include "backend/cuda/page_tensor_map.h"
#include "backend/cuda/prefill_attention.h"
#include "backend/cuda/q8_scale_table.h"
#include "backend/cuda/query_rotation_tiles.h"
#include "quant/kv_rotations.h"
#endif

namespace oscar::cli {
namespace {

struct BenchPrefillAttentionOptions {
  std::string model = "qwen3-8b";
  std::string prompt_lens = "8192,32768,65536,131072";
  int64_t chunk_tokens = kGpuPrefillChunkTokens;
  int iterations = 3;
  std::string kv_dtypes = "bf16,int2";
  std::string scale_format = "q8";
  std::string band_tokens = std::to_string(kOscarBandTokens);
  std::string kernel = "tensor-core";  // or "float"
  std::string json_path;
};

#ifdef OSCAR_HAVE_CUDA
using namespace oscar::cuda;

// Attention FLOPs of a causal prefill of `tokens` tokens, one layer: 2 L^2 D H_q.
double prefill_attention_flops(const ModelConfig& model, int64_t tokens) {
  return 2.0 * double(tokens) * double(tokens) * double(model.head_dim) * double(model.num_heads);
}

struct PrefillAttentionTiming {
  double time_us = 0;
  double dequantize_us = 0;
  bool queries_rotated = false;  // by the kernel, from q|k|v rows
};

// One layer's prefill attention of `tokens` tokens in chunks: a sequence per chunk, filled to the
// chunk's start, with the chunk's pages reserved.
PrefillAttentionTiming time_prefill_attention(const ModelConfig& model, const KvCacheConfig& kv,
                                              int64_t tokens, int64_t chunk, bool tensor_cores,
                                              int iterations) {
  const int group = int(model.group_size());
  const PageLayout layout = make_page_layout(kv, model.num_kv_heads, model.head_dim);
  const PageLayout band_layout =
      kv.has_band() ? make_band_layout(kv, model.num_kv_heads, model.head_dim) : PageLayout{};
  KvPageCounts capacity{};
  std::vector<int64_t> starts;
  for (int64_t start = 0; start < tokens; start += chunk) {
    starts.push_back(start);
    // The sequence filled to the chunk's start, and the chunk's pages in every format.
    const KvPageCounts one = bench_pool_capacity(kv, start + chunk, 1);
    const int64_t chunk_pages = chunk / kv.page_size_tokens + 2;
    capacity.full += one.full + chunk_pages;
    capacity.quantized += kv.quantized() ? one.quantized + chunk_pages : 0;
    capacity.band += kv.has_band() ? one.band + chunk_pages : 0;
  }
  KvPagePools pools(capacity);
  const DeviceKvPages pages(layout, 1, capacity);
  launch_fill_kv_noise(pages, 0, layout, band_layout, capacity, 23, nullptr);
  const StepPlanShape shape{model.num_kv_heads, group, true, 1, 0, tensor_cores};
  struct Chunk {
    StepPlan plan;
    std::unique_ptr<DeviceStep> step;
  };
  std::vector<Chunk> chunks;
  std::vector<int32_t> token_ids(size_t(chunk), 1);
  int64_t rows = 0, partial_records = 0, scratch_pages = 0;
  for (const int64_t start : starts) {
    std::vector<SequencePages> sequence = fill_sequences(kv, pools, start, 1);
    const int64_t count = std::min(chunk, tokens - start);
    require(sequence[0].reserve(count, kv, pools),
            "prefill-attention bench: the KV page pools are too small");
    const SequenceStep step{std::span(token_ids.data(), size_t(count)), &sequence[0], false};
    Chunk c;
    make_step_plan({&step, 1}, kv, shape, c.plan);
    c.step = std::make_unique<DeviceStep>();
    c.step->upload(c.plan, nullptr);
    rows = std::max(rows, count);
    partial_records = std::max(partial_records, c.plan.partial_records);
    scratch_pages = std::max(scratch_pages, c.plan.scratch_pages());
    chunks.push_back(std::move(c));
  }
  const int64_t q_floats = rows * model.num_heads * model.head_dim;
  const DeviceBuffer<float> queries = random_device_queries(q_floats);
  // The engine's prefill queries: q|k|v rows, rotated by the kernel (the k and v parts unread).
  const bool rotating = tensor_cores && kv.rotates_keys();
  const int64_t qkv_stride = (model.num_heads + 2 * model.num_kv_heads) * model.head_dim;
  const DeviceBuffer<float> qkv = random_device_queries(rotating ? rows * qkv_stride : 0);
  DeviceBuffer<__nv_bfloat16> rotation_tiles;
  if (rotating) {
    const KvRotations hadamard = hadamard_rotations(1, model.num_kv_heads, model.head_dim);
    upload(
        query_rotation_tiles(hadamard.layer_key_rotations(0, model.num_kv_heads), model.head_dim),
        rotation_tiles);
  }
  DeviceBuffer<float> partials(
      size_t(partial_records * partial_record_floats(group, model.head_dim)));
  DeviceBuffer<__nv_bfloat16> out(static_cast<size_t>(q_floats));
  DeviceBuffer<std::byte> scratch(
      size_t(std::max<int64_t>(1, scratch_pages) * layout.full_page_bytes));
  const DeviceBuffer<float> q8 = make_q8_scale_table();
  const int float_grid = float_block_attention_resident_blocks();
  const CUtensorMap full_map = make_page_tensor_map(pages.full(0), capacity.full, layout);
  const CUtensorMap scratch_map =
      make_page_tensor_map(scratch.data(), std::max<int64_t>(1, scratch_pages), layout);
  auto arguments = [&](const DeviceStep& step) {
    AttentionArgs args = layer_attention_args(model, kv, layout, band_layout, pages, step,
                                              queries.data(), partials.data(), q8.data());
    args.scratch_pages = scratch.data();
    args.output = out.data();
    if (rotating) {
      args.prefill_queries = qkv.data();
      args.prefill_query_stride = qkv_stride;
      args.query_rotation_tiles = rotation_tiles.data();
    }
    return args;
  };
  auto dequantize = [&](const Chunk& c, const AttentionArgs& args) {
    launch_kv_dequantize(layout, args.quantized_pages, c.step->dequantize(),
                         int64_t(c.plan.dequantize.size()), args.q8_scales, scratch.data(),
                         nullptr);
    launch_kv_dequantize(band_layout, args.band_pages, c.step->band_dequantize(),
                         int64_t(c.plan.band_dequantize.size()), args.q8_scales, scratch.data(),
                         nullptr);
  };
  auto run_all = [&](bool attention) {
    for (const Chunk& c : chunks) {
      const AttentionArgs args = arguments(*c.step);
      const int64_t items = int64_t(c.plan.block_items.size());
      if (tensor_cores) dequantize(c, args);
      if (!attention) continue;
      if (tensor_cores) {
        launch_prefill_attention(args, items, full_map, scratch_map, nullptr);
      } else {
        launch_float_block_attention(
            args, int(std::min<int64_t>(items * model.num_kv_heads, float_grid)), nullptr);
      }
      launch_attention_combine(c.step->combine(), int64_t(c.plan.rows.size()), c.plan.max_splits(),
                               partials.data(), int(model.num_kv_heads), group, int(model.head_dim),
                               out.data(), nullptr, nullptr);
    }
  };
  PrefillAttentionTiming m;
  m.queries_rotated = rotating;
  m.time_us = median_launch_us([&](int) { run_all(true); }, iterations);
  if (tensor_cores && kv.quantized())
    m.dequantize_us = median_launch_us([&](int) { run_all(false); }, iterations);
  return m;
}

void run_bench_prefill_attention(const BenchPrefillAttentionOptions& o) {
  const ModelConfig model = hf_config(o.model);
  require(o.kernel == "tensor-core" || o.kernel == "float",
          "--kernel must be tensor-core or float, got {}", o.kernel);
  require(o.chunk_tokens > 0, "--chunk-tokens must be positive");
  const bool tensor_cores = o.kernel == "tensor-core";
  const std::vector<KvCacheConfig> caches = bench_kv_configs(
      o.kv_dtypes, parse_param_format(o.scale_format), o.band_tokens, model.head_dim);
  const GpuDescription gpu = describe_gpu();
  fmt::print(
      "{} ({}); {} KV shape: {} KV heads x {} query heads per KV head x D {}; {} kernel, chunks of "
      "{}\n",
      gpu.name, gpu.driver, o.model, model.num_kv_heads, model.group_size(), model.head_dim,
      o.kernel, o.chunk_tokens);
  fmt::print("{:>5} {:>5} {:>8} {:>12} {:>9} {:>12}\n", "kv", "band", "tokens", "time_ms",
             "TFLOP/s", "dequantize");
  std::vector<nlohmann::json> rows;
  for (const int64_t tokens : parse_int_list(o.prompt_lens)) {
    for (const KvCacheConfig& kv : caches) {
      const PrefillAttentionTiming m =
          time_prefill_attention(model, kv, tokens, o.chunk_tokens, tensor_cores, o.iterations);
      const double tflops = prefill_attention_flops(model, tokens) / (m.time_us * 1e-6) / 1e12;
      fmt::print("{:>5} {:>5} {:>8} {:>12.3f} {:>9.1f} {:>11.1f}%\n", to_string(kv.dtype),
                 kv.band_tokens, tokens, m.time_us / 1e3, tflops,
                 100.0 * m.dequantize_us / m.time_us);
      rows.push_back({{"kernel", tensor_cores ? "prefill_attention" : "float_block_attention"},
                      {"kv", std::string(to_string(kv.dtype))},
                      {"kv_config", describe(kv)},
                      {"model", o.model},
                      {"tokens", tokens},
                      {"chunk_tokens", o.chunk_tokens},
                      {"time_us", m.time_us},
                      {"dequantize_us", m.dequantize_us},
                      {"queries_rotated_in_kernel", m.queries_rotated},
                      {"tflops", tflops}});
    }
  }
  write_rows(o.json_path, gpu, rows);
}
#else
void run_bench_prefill_attention(const BenchPrefillAttentionOptions&) {
  fail("oscar bench prefill-attention: this oscar was built without the CUDA backend");
}
#endif

}  // namespace

void register_bench_prefill_attention(CLI::App& bench) {
  auto options = std::make_shared<BenchPrefillAttentionOptions>();
  CLI::App* command = bench.add_subcommand(
      "prefill-attention", "GPU prefill attention alone: a chunked prompt, bf16 vs INT2 pages");
  command->add_option("--model", options->model, "a models/hf-configs name")->capture_default_str();
  command->add_option("--prompt-lens", options->prompt_lens)->capture_default_str();
  command->add_option("--chunk-tokens", options->chunk_tokens)->capture_default_str();
  command->add_option("--iterations", options->iterations)->capture_default_str();
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
          "INT2: tokens behind the recent window also held at 4 bits, a list (one INT2 row each)")
      ->capture_default_str();
  command
      ->add_option("--kernel", options->kernel,
                   "tensor-core, or float (the kernel KIVI's caches use)")
      ->capture_default_str();
  command->add_option("--json", options->json_path, "write the rows as JSON");
  command->callback([options] { run_bench_prefill_attention(*options); });
}

}  // namespace oscar::cli
