#pragma once
// Shared by the GPU benchmarks (bench_decode_attention.cpp, bench_decode_step.cpp): the device's
// measured copy bandwidth, the model shapes of models/hf-configs, sequences filled to a context,
// and result rows as JSON.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvcache/kv_cache_config.h"
#include "kvcache/page_layout.h"
#include "kvcache/page_pool.h"
#include "kvcache/sequence_pages.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "util/statistics.h"

namespace oscar::cli {

struct GpuDescription {
  std::string name;      // as cudaGetDeviceProperties names it
  std::string driver;    // e.g. "13.0"
  double copy_gbps = 0;  // device-to-device copy, bytes read + written per second / 1e9
};

// Measures the copy bandwidth (a 2 GiB device-to-device copy, median of 10).
GpuDescription describe_gpu();

// models/hf-configs/<name>.json of the source tree (e.g. "qwen3-8b").
ModelConfig hf_config(const std::string& name);

std::vector<int64_t> parse_int_list(const std::string& text);  // "4096,8192" -> {4096, 8192}

// The caches a benchmark run compares, of the dtypes listed in `dtypes` (--kv-dtypes: "bf16",
// "int2" or both, comma-separated): bf16, then INT2 with each 4-bit band length of the list
// `band_tokens` (--kv-band-tokens; 0: no band), validated. INT2 is g128 with `scale_format` group
// parameters, sink 64, recent 256, 64-token pages: OSCAR at `oscar`'s defaults when given a
// rotations file, else quarot (rotated keys, the same page layout).
std::vector<KvCacheConfig> bench_kv_configs(const std::string& dtypes, ParamFormat scale_format,
                                            const std::string& band_tokens, int64_t head_dim,
                                            const std::string& oscar_rotations = "");

// Microseconds per launch of launch(i), i = 0, 1, ...: `iterations` launches back to back between
// two events, as in the decode step's CUDA graph (the GPU's time, not the host's launch latency),
// median of five such runs after three warm-up launches.
double median_launch_us(const std::function<void(int)>& launch, int iterations);

// A rotations file for random weights, which were never calibrated: Hadamard rotations and a
// geometric query spectrum, written to a temporary file whose path is returned. The kernels' work
// does not depend on the values.
std::string write_synthetic_oscar_rotations(const ModelWeights& weights);

// A file removed when this goes out of scope, however the run ends (the rotations file of
// write_synthetic_oscar_rotations, read by the backends).
struct TemporaryFile {
  std::string path;
  explicit TemporaryFile(std::string file_path) : path(std::move(file_path)) {}
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;
  ~TemporaryFile();
};

// Tokens a benchmark sequence grows by per SequencePages::reserve / commit while it is filled: the
// page tables' bookkeeping walks every page at each step, so one token at a time would take
// seconds at 128K x 64.
inline constexpr int64_t kFillChunkTokens = 1024;

// Page pool capacity for `batch` sequences that decode up to `tokens` tokens each, filled one at a
// time by fill_sequences: the engine's capacity rule (capacity_for_sequences) for one-token steps,
// plus one fill chunk's pages.
KvPageCounts bench_pool_capacity(const KvCacheConfig& kv, int64_t tokens, int64_t batch);

// `batch` sequences of `context` tokens each, grown from `pools` through SequencePages::reserve and
// commit, so that each holds exactly the pages the engine keeps for a sequence that decoded to that
// length. Throws when the pools run dry.
std::vector<SequencePages> fill_sequences(const KvCacheConfig& kv, KvPagePools& pools,
                                          int64_t context, int64_t batch);

// The same, except that sequences `distinct` and above share the whole pages of sequence
// s % distinct, as a prefix cache would hold them, each with its own last, partial page: every
// sequence reads `context` tokens of pages, from `distinct` sequences' worth of memory. For
// full-precision caches only (a shared page must be one no sequence writes).
std::vector<SequencePages> fill_sequences_sharing_pages(const KvCacheConfig& kv, KvPagePools& pools,
                                                        int64_t context, int64_t batch,
                                                        int64_t distinct);

// Bytes of one layer's pages that the decode rule reads for the query at position t, all KV heads.
int64_t kv_bytes_read(const KvCacheConfig& kv, const PageLayout& layout, int64_t t);

// Writes {"device": ..., "rows": [...]} to `path` when it is not empty, replacing the file at once.
// Long benches call it after each part, so a run stopped partway keeps the rows it finished.
void write_rows(const std::string& path, const GpuDescription& gpu,
                const std::vector<nlohmann::json>& rows);

}  // namespace oscar::cli
