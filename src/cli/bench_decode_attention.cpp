// oscar bench decode-attention: the paged split-K decode attention kernel alone (decode kernel +
// combine), bf16 pages vs INT2 pages, at a model's KV shape, over contexts x batches. Each row
// reports the time, the fewest bytes the step must move (every KV byte the decode rule reads once,
// the queries read, the outputs written), the achieved GB/s and its fraction of the device copy
// bandwidth measured in the same run. Pages hold random bytes (kv_noise.h), never zeros; when
// one configuration's pages would fit in L2, several copies are cycled so the cache never serves
// a repeat. --kv-band-tokens takes a list: one INT2 row per band length (OSCAR's 4-bit band behind
// the recent window; 0: none). The PyTorch peer is bench/sdpa_decode_attention.py.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>

#include "cli/bench_attention_inputs.h"
#include "cli/bench_gpu_common.h"
#include "cli/commands.h"
#include "util/error.h"

#ifdef OSCAR_HAVE_CUDA
#include "backend/cuda/attention_combine.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/decode_attention.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/device_kv_pages.h"
#include "backend/cuda/device_step.h"
#include "backend/cuda/kv_noise.h"
#include "backend/cuda/q8_scale_table.h"
#include "quant/group_codec.h"
#endif

namespace oscar::cli {
namespace {

struct BenchDecodeAttentionOptions {
  std::string model = "qwen3-8b";
  std::string contexts = "4096,8192,16384,32768,65536,131072";
  std::string batches = "1,8,16,32,64";
  int iterations = 20;
  std::string kv_dtypes = "bf16,int2";  // the caches compared (--kv-dtypes)
  std::string scale_format = "f16";     // of the INT2 group parameters
  int64_t split_tokens = 0;             // > 0: a fixed decode split instead of the plan's choice
  std::string band_tokens = "0";        // INT2 band lengths, a row each
  std::string json_path;
};

#ifdef OSCAR_HAVE_CUDA
using namespace oscar::cuda;

struct Measured {
  double time_us = 0;
  int64_t bytes = 0;
  int64_t split_tokens = 0;  // the plan's decode split
};

Measured measure(const ModelConfig& model, const KvCacheConfig& kv, int64_t context, int64_t batch,
                 int iterations, int64_t split_tokens) {
  const int group = int(model.group_size());
  const PageLayout layout = make_page_layout(kv, model.num_kv_heads, model.head_dim);
  const PageLayout band_layout =
      kv.has_band() ? make_band_layout(kv, model.num_kv_heads, model.head_dim) : PageLayout{};
  // Every row's KV, plus the float queries read and the bf16 outputs written (q_floats counts
  // the whole batch's already).
  const int64_t q_floats = batch * model.num_heads * model.head_dim;
  const int64_t bytes = batch * kv_bytes_read(kv, layout, context) + q_floats * 4 + q_floats * 2;
  // Copies cycled so that at least 512 MB separate two reads of the same page (L2 is 50 MB).
  const int copies =
      int(std::clamp<int64_t>((int64_t(512) << 20) / std::max<int64_t>(bytes, 1) + 1, 1, 16));
  // Each copy: `batch` sequences of `context` cached tokens with the pages of the new token at
  // position `context` reserved, as during a decode step.
  const KvPageCounts capacity = bench_pool_capacity(kv, context + 1, batch * copies);
  KvPagePools pools(capacity);
  std::vector<std::vector<SequencePages>> sets;
  for (int c = 0; c < copies; ++c) {
    sets.push_back(fill_sequences(kv, pools, context, batch));
    for (SequencePages& sequence : sets.back()) {
      require(sequence.reserve(1, kv, pools),
              "decode-attention bench: the KV page pools are too small");
    }
  }
  const DeviceKvPages pages(layout, 1, capacity);
  launch_fill_kv_noise(pages, 0, layout, band_layout, capacity, 17, nullptr);
  const int resident = decode_attention_resident_blocks(layout);
  const StepPlanShape shape{model.num_kv_heads, group, true, resident, split_tokens};
  std::vector<int32_t> tokens(size_t(batch), 1);
  std::vector<std::unique_ptr<DeviceStep>> device_steps;
  int64_t partial_records = 0, max_splits = 0, split = 0;
  for (std::vector<SequencePages>& sequences : sets) {
    std::vector<SequenceStep> steps;
    for (int64_t s = 0; s < batch; ++s)
      steps.push_back({std::span(&tokens[size_t(s)], 1), &sequences[size_t(s)], false});
    StepPlan plan;
    make_step_plan(steps, kv, shape, plan);
    partial_records = std::max(partial_records, plan.partial_records);
    max_splits = std::max(max_splits, plan.max_splits());
    split = plan.decode_split_tokens;
    device_steps.push_back(std::make_unique<DeviceStep>());
    device_steps.back()->upload(plan, nullptr);
  }
  const DeviceBuffer<float> queries = random_device_queries(q_floats);
  DeviceBuffer<float> partials(
      size_t(partial_records * partial_record_floats(group, model.head_dim)));
  DeviceBuffer<__nv_bfloat16> out(static_cast<size_t>(q_floats));
  const DeviceBuffer<float> q8 = make_q8_scale_table();
  auto launch = [&](const DeviceStep& step) {
    const AttentionArgs args = layer_attention_args(model, kv, layout, band_layout, pages, step,
                                                    queries.data(), partials.data(), q8.data());
    launch_decode_attention(args, resident, nullptr);
    launch_attention_combine(step.combine(), batch, max_splits, partials.data(),
                             int(model.num_kv_heads), group, int(model.head_dim), out.data(),
                             nullptr, nullptr);
  };
  const double time_us =
      median_launch_us([&](int i) { launch(*device_steps[size_t(i % copies)]); }, iterations);
  return {time_us, bytes, split};
}

void run_bench_decode_attention(const BenchDecodeAttentionOptions& o) {
  const ModelConfig model = hf_config(o.model);
  const std::vector<KvCacheConfig> caches = bench_kv_configs(
      o.kv_dtypes, parse_param_format(o.scale_format), o.band_tokens, model.head_dim);
  const GpuDescription gpu = describe_gpu();
  fmt::print(
      "{} ({}), copy bandwidth {:.0f} GB/s; {} KV shape: {} KV heads x {} query heads per KV head "
      "x D {}\n",
      gpu.name, gpu.driver, gpu.copy_gbps, o.model, model.num_kv_heads, model.group_size(),
      model.head_dim);
  fmt::print("{:>5} {:>5} {:>8} {:>6} {:>11} {:>12} {:>8} {:>6} {:>6}\n", "kv", "band", "context",
             "batch", "time_us", "bytes", "GB/s", "bw", "split");
  std::vector<nlohmann::json> rows;
  for (const int64_t context : parse_int_list(o.contexts)) {
    for (const int64_t batch : parse_int_list(o.batches)) {
      for (const KvCacheConfig& kv : caches) {
        const KvDtype dtype = kv.dtype;
        const int64_t band = kv.band_tokens;
        const PageLayout layout = make_page_layout(kv, model.num_kv_heads, model.head_dim);
        if (double(batch) * double(kv_bytes_read(kv, layout, context)) >
            0.6 * double(cuda_free_bytes())) {
          fmt::print("{:>5} {:>5} {:>8} {:>6}   skipped: the pages do not fit\n", to_string(dtype),
                     band, context, batch);
          continue;
        }
        const Measured m = measure(model, kv, context, batch, o.iterations, o.split_tokens);
        const double gbps = double(m.bytes) / (m.time_us * 1e-6) / 1e9;
        fmt::print("{:>5} {:>5} {:>8} {:>6} {:>11.1f} {:>12} {:>8.0f} {:>5.1f}% {:>6}\n",
                   to_string(dtype), band, context, batch, m.time_us, m.bytes, gbps,
                   100.0 * gbps / gpu.copy_gbps, m.split_tokens);
        rows.push_back({{"kernel", "decode_attention"},
                        {"kv", std::string(to_string(dtype))},
                        {"model", o.model},
                        {"context", context},
                        {"batch", batch},
                        {"time_us", m.time_us},
                        {"bytes", m.bytes},
                        {"gbps", gbps},
                        {"bw_fraction", gbps / gpu.copy_gbps},
                        {"split_tokens", m.split_tokens},
                        {"band_tokens", band},
                        {"kv_config", describe(kv)}});
      }
    }
  }
  write_rows(o.json_path, gpu, rows);
}
#else
void run_bench_decode_attention(const BenchDecodeAttentionOptions&) {
  fail("oscar bench decode-attention: this oscar was built without the CUDA backend");
}
#endif

}  // namespace

void register_bench_decode_attention(CLI::App& bench) {
  auto options = std::make_shared<BenchDecodeAttentionOptions>();
  CLI::App* command =
      bench.add_subcommand("decode-attention", "GPU decode attention alone: bf16 vs INT2 pages");
  command->add_option("--model", options->model, "a models/hf-configs name")->capture_default_str();
  command->add_option("--contexts", options->contexts)->capture_default_str();
  command->add_option("--batches", options->batches)->capture_default_str();
  command->add_option("--iterations", options->iterations)->capture_default_str();
  command
      ->add_option("--kv-dtypes", options->kv_dtypes,
                   "the caches compared: bf16, int2 or both, comma-separated")
      ->capture_default_str();
  command
      ->add_option("--kv-scale-format", options->scale_format,
                   "INT2 group parameters: f16, bf16 or q8")
      ->capture_default_str();
  command->add_option(
      "--split-tokens", options->split_tokens,
      "key positions per split of a decode row, a multiple of 256 (default: the plan's choice)");
  command
      ->add_option(
          "--kv-band-tokens", options->band_tokens,
          "INT2: tokens behind the recent window also held at 4 bits, a list (one INT2 row each; "
          "0: no band)")
      ->capture_default_str();
  command->add_option("--json", options->json_path, "write the rows as JSON");
  command->callback([options] { run_bench_decode_attention(*options); });
}

}  // namespace oscar::cli
