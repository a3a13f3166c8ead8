#pragma once
// Shared by the GPU benchmarks (bench_decode_attention.cpp, bench_decode_step.cpp): the device's
// measured copy bandwidth, the model shapes of models/hf-configs, and result rows as JSON.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvcache/kv_cache_config.h"
#include "kvcache/page_layout.h"
#include "model/model_config.h"
#include "util/statistics.h"

namespace oscar::cli {

struct GpuDescription {
  std::string name;    // e.g. "NVIDIA H100 80GB HBM3"
  std::string driver;  // e.g. "13.0"
  double copy_gbps = 0;  // device-to-device copy, bytes read + written per second / 1e9
};

// Measures the copy bandwidth (a 2 GiB device-to-device copy, median of 10).
GpuDescription describe_gpu();

// models/hf-configs/<name>.json of the source tree (e.g. "qwen3-8b").
ModelConfig hf_config(const std::string& name);

std::vector<int64_t> parse_int_list(const std::string& text);  // "4096,8192" -> {4096, 8192}

// The cache the benchmarks compare: bf16, or INT2 with the page layout of oscar (quarot: rotated
// keys without a rotations file), g128 with `scale_format` group parameters, sink 64, recent
// 256, 64-token pages.
KvCacheConfig bench_kv_config(KvDtype dtype, ParamFormat scale_format);

// Bytes of one layer's pages that the decode rule reads for the query at position t, all KV heads.
int64_t kv_bytes_read(const KvCacheConfig& kv, const PageLayout& layout, int64_t t);

// Writes {"device": ..., "rows": [...]} to `path` when it is not empty.
void write_rows(const std::string& path, const GpuDescription& gpu, const std::vector<nlohmann::json>& rows);

}  // namespace oscar::cli
