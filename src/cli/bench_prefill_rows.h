#pragma once
// The arithmetic of `oscar bench prefill`, apart from the GPU so that the CPU tests check it: the
// work of prefilling L tokens by issue 40's count, and a result row from the times measured.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvcache/kv_cache_config.h"
#include "model/model_config.h"
#include "util/statistics.h"

namespace oscar::cli {

// Elements of the matrices the linear layers multiply by: every layer's q, k, v, o, gate, up and
// down projections, and the LM head (the embedding's matrix where the model ties them).
struct MatrixParams {
  int64_t layers = 0;
  int64_t lm_head = 0;
  int64_t total() const { return layers + lm_head; }
};
MatrixParams matrix_params(const ModelConfig& config);

// Floating-point operations of one prefill of L tokens (a multiply-add counts two).
struct PrefillWork {
  // Issue 40's count, the same for every engine compared: 2 params L for the linear layers (the LM
  // head counted for all L tokens, though oscar and the peer run it for the last one only) and
  // 2 L^2 head_dim q_heads layers for causal attention (QK^T and PV over the lower triangle).
  double linear = 0;
  double attention = 0;
  // What oscar's matrix products compute: every layer's for all L tokens, the LM head for one row
  // of logits a chunk. The linear layers' rate alone divides this by their time.
  double linear_computed = 0;
  double total() const { return linear + attention; }
};
PrefillWork prefill_work(const ModelConfig& config, int64_t prompt_tokens, int64_t logit_rows);

// A prompt's prefill times in seconds: the wall time of the runs timed by their total alone (their
// median is the TTFT) and that total, and the GPU time of one more run's steps and their
// phases (ForwardPhaseTimes summed over its chunks).
struct PrefillTimes {
  // Each run's first chunk's forward called to its last chunk's logits on the host.
  std::vector<double> runs;
  double ttft() const { return median(runs); }
  // The same runs' GPU time, each step's first launch to its last (PhaseTiming::total): where a
  // run is slower than the others, whether the GPU or the host took the time.
  std::vector<double> gpu_runs;
  // The wall time of the run whose phases are timed: against gpu, the host's share of that run,
  // where against ttft it would mix in how runs differ.
  double phase_run = 0;
  double gpu = 0;
  double attention = 0;
  double linear = 0;
  double kv_write = 0;
  double kv_quantize = 0;  // of kv_write: error feedback, the band's copies
  double dequantize = 0;   // of attention: quantized pages into the kernel's bf16 scratch
};

// What a row measured.
struct PrefillRowKey {
  std::string device;
  std::string model;
  KvCacheConfig kv;
  int64_t prompt_tokens = 0;
  int64_t chunk_tokens = 0;
  int64_t chunks = 0;
  int repeats = 0;
  int tensor_parallel_size = 1;  // GPUs the model is split over (the work is still the whole's)
  // Decode rows beside each chunk (bench_prefill_schedule.h): sequences, and their context at the
  // first step. The row names them only when there are some.
  int64_t decode_batch = 0;
  int64_t decode_context = 0;
};

// A JSON row: the key, the times, tokens/s, the phases' shares of the GPU time, and TFLOP/s of the
// whole prefill over its TTFT, of attention over its time and of the linear layers over theirs.
// The work counted is the prompt's alone, also where decode rows share its steps.
nlohmann::json prefill_row(const ModelConfig& config, const PrefillRowKey& key,
                           const PrefillTimes& times);

// The printed table: its header, and one line of a row.
std::string prefill_table_header();
std::string prefill_table_line(const nlohmann::json& row);

}  // namespace oscar::cli
