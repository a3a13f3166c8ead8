#include "cli/bench_gpu_common.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>

#include "cli/model_options.h"
#include "cli/run_record.h"
#include "model/model_fingerprint.h"
#include "quant/kv_rotations.h"
#include "util/error.h"
#include "util/file_io.h"
#include "util/statistics.h"

#ifdef OSCAR_HAVE_CUDA
#include "backend/cuda/device_buffer.h"
#endif

namespace oscar::cli {

GpuDescription describe_gpu() {
#ifdef OSCAR_HAVE_CUDA
  using namespace oscar::cuda;
  GpuDescription gpu;
  cudaDeviceProp properties{};
  check(cudaGetDeviceProperties(&properties, 0), "cudaGetDeviceProperties");
  gpu.name = properties.name;
  int driver = 0;
  check(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
  gpu.driver = fmt::format("CUDA driver API {}.{}", driver / 1000, (driver % 1000) / 10);
  const size_t bytes = size_t(1) << 31;
  DeviceBuffer<std::byte> source(bytes), target(bytes);
  check(cudaMemset(source.data(), 1, bytes), "cudaMemset");
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<double> seconds;
  for (int i = 0; i < 12; ++i) {
    check(cudaEventRecord(start), "cudaEventRecord");
    check(cudaMemcpyAsync(target.data(), source.data(), bytes, cudaMemcpyDeviceToDevice),
          "cudaMemcpyAsync");
    check(cudaEventRecord(stop), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    if (i >= 2) seconds.push_back(ms / 1e3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  gpu.copy_gbps = 2.0 * double(bytes) / median(seconds) / 1e9;
  return gpu;
#else
  fail("oscar bench: this oscar was built without the CUDA backend");
#endif
}

ModelConfig hf_config(const std::string& name) {
  return load_model_config(default_model_dir() + "/../hf-configs/" + name + ".json");
}

namespace {

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) items.push_back(item);
  return items;
}

}  // namespace

std::vector<int64_t> parse_int_list(const std::string& text) {
  std::vector<int64_t> values;
  for (const std::string& item : split_commas(text)) {
    try {
      values.push_back(std::stoll(item));
    } catch (const std::exception&) {
      fail("expected a comma-separated list of integers, got '{}'", text);
    }
  }
  return values;
}

namespace {

KvCacheConfig bench_kv_config(KvDtype dtype, ParamFormat scale_format,
                              const std::string& oscar_rotations) {
  KvCacheConfig kv;
  kv.dtype = dtype;
  kv.method = dtype == KvDtype::bf16 ? KvMethod::naive : KvMethod::quarot;
  if (kv.quantized() && !oscar_rotations.empty()) {
    kv.method = KvMethod::oscar;
    kv.rotations_path = oscar_rotations;
  }
  // The method's defaults as `oscar` applies them, with the given group parameters.
  ModelOptions defaults;
  defaults.kv_scale_format = std::string(to_string(scale_format));
  apply_quantization_options(defaults, kv);
  return kv;
}

}  // namespace

std::vector<KvCacheConfig> bench_kv_configs(const std::string& dtypes, ParamFormat scale_format,
                                            const std::string& band_tokens, int64_t head_dim,
                                            const std::string& oscar_rotations) {
  bool bf16 = false, int2 = false;
  for (const std::string& item : split_commas(dtypes)) {
    if (item == "bf16") {
      bf16 = true;
    } else if (item == "int2") {
      int2 = true;
    } else {
      fail(
          "--kv-dtypes: '{}' is not a benchmark cache (expected bf16, int2 or both, "
          "comma-separated)",
          item);
    }
  }
  require(bf16 || int2, "--kv-dtypes: '{}' names no cache (expected bf16, int2 or both)", dtypes);
  std::vector<KvCacheConfig> configs;
  if (bf16) configs.push_back(bench_kv_config(KvDtype::bf16, scale_format, oscar_rotations));
  if (!int2) return configs;
  for (const int64_t band : parse_int_list(band_tokens)) {
    KvCacheConfig kv = bench_kv_config(KvDtype::int2, scale_format, oscar_rotations);
    kv.band_tokens = band;
    validate(kv, head_dim);
    configs.push_back(kv);
  }
  return configs;
}

double median_launch_us(const std::function<void(int)>& launch, int iterations) {
#ifdef OSCAR_HAVE_CUDA
  using namespace oscar::cuda;
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  for (int i = 0; i < 3; ++i) launch(i);
  std::vector<double> times;
  for (int run = 0; run < 5; ++run) {
    check(cudaEventRecord(start), "cudaEventRecord");
    for (int i = 0; i < iterations; ++i) launch(run * iterations + i);
    check(cudaEventRecord(stop), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    times.push_back(double(ms) * 1e3 / iterations);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return median(times);
#else
  (void)launch;
  (void)iterations;
  fail("oscar bench: this oscar was built without the CUDA backend");
#endif
}

std::string write_synthetic_oscar_rotations(const ModelWeights& weights) {
  const ModelConfig& config = weights.config;
  KvRotations r = hadamard_rotations(config.num_layers, config.num_kv_heads, config.head_dim);
  r.key_eigenvalues.resize(r.key.size() / size_t(config.head_dim));
  for (size_t i = 0; i < r.key_eigenvalues.size(); ++i) {
    r.key_eigenvalues[i] = float(std::pow(0.95, double(i % size_t(config.head_dim))));
  }
  record_model(model_fingerprint(weights), r);
  const std::string path = (std::filesystem::temp_directory_path() /
                            fmt::format("oscar-bench-rotations-{}.safetensors", getpid()))
                               .string();
  save_kv_rotations(path, r);
  return path;
}

TemporaryFile::~TemporaryFile() {
  std::filesystem::remove(path);
}

KvPageCounts bench_pool_capacity(const KvCacheConfig& kv, int64_t tokens, int64_t batch) {
  const KvPageCounts decoding = capacity_for_sequences(kv, tokens, batch, 1);
  const KvPageCounts filling = capacity_for_sequences(kv, 0, 1, kFillChunkTokens);
  return {decoding.full + filling.full, decoding.quantized + filling.quantized,
          decoding.band + filling.band};
}

std::vector<SequencePages> fill_sequences(const KvCacheConfig& kv, KvPagePools& pools,
                                          int64_t context, int64_t batch) {
  std::vector<SequencePages> sequences(size_t(std::max<int64_t>(0, batch)));
  for (SequencePages& sequence : sequences) {
    while (sequence.num_tokens() < context) {
      const int64_t chunk = std::min(kFillChunkTokens, context - sequence.num_tokens());
      require(sequence.reserve(chunk, kv, pools),
              "bench: the KV page pools are too small for {} sequences of {} tokens", batch,
              context);
      sequence.commit(chunk, kv, pools);
    }
  }
  return sequences;
}

std::vector<SequencePages> fill_sequences_sharing_pages(const KvCacheConfig& kv, KvPagePools& pools,
                                                        int64_t context, int64_t batch,
                                                        int64_t distinct) {
  require(!kv.quantized(), "bench: only full-precision sequences share pages");
  require(distinct >= 1 && distinct <= batch, "bench: {} distinct sequences of {}", distinct,
          batch);
  std::vector<SequencePages> sequences = fill_sequences(kv, pools, context, distinct);
  const int64_t shared_pages = context / kv.page_size_tokens;
  for (int64_t s = distinct; s < batch; ++s) {
    const std::vector<LogicalPage>& source = sequences[size_t(s % distinct)].pages();
    std::vector<LogicalPage> prefix(source.begin(), source.begin() + shared_pages);
    for (const LogicalPage& page : prefix) pools.full.retain(page.full);
    SequencePages sequence;
    sequence.attach_prefix(std::move(prefix), shared_pages * kv.page_size_tokens);
    const int64_t rest = context - sequence.num_tokens();
    if (rest > 0) {
      require(sequence.reserve(rest, kv, pools),
              "bench: the KV page pools are too small for the shared sequences");
      sequence.commit(rest, kv, pools);
    }
    sequences.push_back(std::move(sequence));
  }
  return sequences;
}

int64_t kv_bytes_read(const KvCacheConfig& kv, const PageLayout& layout, int64_t t) {
  const int64_t quantized_stop = std::min(quantized_end(kv, t + 1), t + 1);
  const int64_t quantized = std::max<int64_t>(0, quantized_stop - kv.sink_tokens);
  const int64_t banded =
      std::max<int64_t>(0, quantized_stop - std::max(kv.sink_tokens, band_begin(kv, t + 1)));
  const int64_t full = t + 1 - quantized;
  const int64_t full_token = 2 * layout.head_dim * layout.element_bytes;
  auto quantized_token = [](const PageLayout& l) {
    return l.bits == 0 ? 0
                       : 2 * (l.code_bytes_per_row + (l.head_dim / l.group_size) * l.param_bytes);
  };
  const int64_t band_token =
      kv.has_band() ? quantized_token(make_band_layout(kv, layout.num_kv_heads, layout.head_dim))
                    : 0;
  return layout.num_kv_heads *
         (full * full_token + (quantized - banded) * quantized_token(layout) + banded * band_token);
}

void write_rows(const std::string& path, const GpuDescription& gpu,
                const std::vector<nlohmann::json>& rows) {
  if (path.empty()) return;
  const nlohmann::json root = with_run_record(
      {{"device", gpu.name}, {"driver", gpu.driver}, {"copy_gbps", gpu.copy_gbps}, {"rows", rows}});
  write_file_atomically(path, root.dump(1) + "\n");
}

}  // namespace oscar::cli
