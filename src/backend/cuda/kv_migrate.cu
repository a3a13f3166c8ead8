// Migration of tokens out of the recent window: quantize from the full-precision page into the
// quantized page. Mirrors CpuKvStore::quantize, quantize_token_groups and quantize_key_channels
// (backend/cpu/cpu_kv_store.cpp) with the codec of quant/group_codec.cpp (device_codec.cuh) and the
// published quantizer of quant/published_quantizer.cpp: the same bf16 inputs give the same codes
// and parameters.
#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dequantize_chunks.h"
#include "backend/cuda/device_codec.cuh"
#include "backend/cuda/kernel_sizes.h"
#include "backend/cuda/layer_kernels.h"
#include "backend/cuda/warp_primitives.cuh"
#include "quant/published_quantizer.h"

namespace oscar::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;

// Reductions over the `lanes` lanes (a power of two) that hold one group.
template <typename T, typename Op>
__device__ __forceinline__ T group_reduce(T value, int lanes, Op op) {
  for (int offset = 1; offset < lanes; offset *= 2)
    value = op(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}

// choose_group_params: the clip ratio as given, or the candidate with the least squared error
// (the first one on ties, as on the CPU).
template <int N>
__device__ DeviceParams choose_params(const float (&x)[N], float lo, float hi, int lanes, int bits,
                                      float ratio, bool search, ParamFormat format,
                                      const float* q8_scales) {
  if (!search) return params_for_range(lo * ratio, hi * ratio, bits, format, q8_scales);
  DeviceParams best{};
  double best_error = 0.0;
  for (int c = 0; c < kClipCandidateCount; ++c) {
    const float candidate = clip_candidate(c);
    const DeviceParams p =
        params_for_range(lo * candidate, hi * candidate, bits, format, q8_scales);
    double error = 0.0;
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const double diff =
          double(x[i]) - double(float(quantize_code(x[i], p, bits)) * p.scale + p.zero);
      error += diff * diff;
    }
    error = group_reduce(error, lanes, [](double a, double b) { return a + b; });
    if (c == 0 || error < best_error) {
      best = p;
      best_error = error;
    }
  }
  return best;
}

// clamp_row_at_quantile: the row's magnitude at index int(ratio * D) of their ascending order, and
// the row clamped to [-t, t] (as std::clamp). The row is N channels in each of `lanes` lanes from
// `first_lane` (channel row_lane * N + i in x[i]). Each magnitude's rank counts the smaller ones
// and the equal ones of lower channels, so exactly one has the wanted rank, and its value is the
// one a sort puts there.
template <int N>
__device__ void clamp_row_at_quantile(float (&x)[N], int lanes, int first_lane, int row_lane,
                                      float ratio) {
  const int head_dim = lanes * N;
  const int wanted = min(max(int(double(ratio) * double(head_dim)), 0), head_dim - 1);
  float magnitude[N];
  int rank[N];
#pragma unroll
  for (int i = 0; i < N; ++i) {
    magnitude[i] = fabsf(x[i]);
    rank[i] = 0;
  }
  for (int j = 0; j < lanes; ++j) {
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const float other = __shfl_sync(0xffffffffu, magnitude[k], first_lane + j);
      const int other_channel = j * N + k;
#pragma unroll
      for (int i = 0; i < N; ++i) {
        rank[i] +=
            other < magnitude[i] || (other == magnitude[i] && other_channel < row_lane * N + i);
      }
    }
  }
  float threshold = 0.0f;  // magnitudes are >= 0: the maximum over the lanes is the one found
#pragma unroll
  for (int i = 0; i < N; ++i) {
    if (rank[i] == wanted) threshold = magnitude[i];
  }
  threshold = group_reduce(threshold, lanes, [](float a, float b) { return fmaxf(a, b); });
#pragma unroll
  for (int i = 0; i < N; ++i) {
    x[i] = x[i] < -threshold ? -threshold : (threshold < x[i] ? threshold : x[i]);
  }
}

// lloyd_max_row for a row held by a whole warp (lane l: channels 4l..4l+3): the mean and standard
// deviation summed in channel order in double by every lane, as the CPU sums them; the row's
// uniform-equivalent grid, and in x each channel's code * scale + zero, from which quantize_code
// recovers the codes (the CPU's quantize_group does the same). Explicitly rounded operations keep
// nvcc from fusing what the CPU computes as separate steps.
__device__ DeviceParams lloyd_max_row(float (&x)[4], ParamFormat format, const float* q8_scales) {
  double sum = 0.0;
  for (int j = 0; j < 32; ++j) {
#pragma unroll
    for (int k = 0; k < 4; ++k) sum = __dadd_rn(sum, double(__shfl_sync(0xffffffffu, x[k], j)));
  }
  const double mean = sum / double(kHeadDim);
  double sum_squares = 0.0;
  for (int j = 0; j < 32; ++j) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const double centred = __dsub_rn(double(__shfl_sync(0xffffffffu, x[k], j)), mean);
      sum_squares = __dadd_rn(sum_squares, __dmul_rn(centred, centred));
    }
  }
  const double deviation = sqrt(sum_squares / double(kHeadDim));
  const double half_range = __dmul_rn(1.5 * double(kLloydMaxScaleRatio), deviation);
  const DeviceParams grid = params_for_range(
      float(__dsub_rn(mean, half_range)), float(__dadd_rn(mean, half_range)), 2, format, q8_scales);
  const double threshold = __dmul_rn(double(kLloydMaxThreshold), deviation);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const double centred = __dsub_rn(double(x[i]), mean);
    const int code = centred < -threshold ? 0 : centred < 0 ? 1 : centred < threshold ? 2 : 3;
    x[i] = __fadd_rn(__fmul_rn(float(code), grid.scale), grid.zero);
  }
  return grid;
}

// The arenas of layer `layer` of the args' layers.
__device__ __forceinline__ const std::byte* layer_full_pages(const KvMigrateArgs& args, int layer) {
  return args.full_pages + layer * args.full_layer_bytes;
}
__device__ __forceinline__ std::byte* layer_quantized_pages(const KvMigrateArgs& args, int layer) {
  return args.quantized_pages + layer * args.quantized_layer_bytes;
}

// A task's token: its pages and its slot in them.
struct TokenSlot {
  PageIds ids;
  int slot;
};
__device__ __forceinline__ TokenSlot token_slot(const KvMigrateArgs& args,
                                                const MigrateTask& task) {
  const int64_t page_rows = args.layout.page_size_tokens;
  return {args.page_table[task.page_table + task.position / page_rows],
          int(task.position % page_rows)};
}

// A token's keys or values of one KV head in layer `layer`: its row of its full-precision page (in
// 16-byte vectors of eight bf16), its quantized page (the band's copy with args.band), and where
// its codes and its group parameters lie in that page.
__device__ __forceinline__ const uint4* full_row(const KvMigrateArgs& args, int layer,
                                                 const PageIds& ids, int kv_head, int slot,
                                                 bool is_value) {
  const PageLayout& l = args.layout;
  return reinterpret_cast<const uint4*>(
      layer_full_pages(args, layer) + int64_t(ids.full) * l.full_page_bytes +
      (is_value ? l.full_value_offset(kv_head, slot) : l.full_key_offset(kv_head, slot)));
}
__device__ __forceinline__ std::byte* quantized_page(const KvMigrateArgs& args, int layer,
                                                     const PageIds& ids) {
  return layer_quantized_pages(args, layer) +
         int64_t(args.band ? ids.band : ids.quantized) * args.layout.quantized_page_bytes;
}
__device__ __forceinline__ int64_t codes_offset(const PageLayout& l, int kv_head, int slot,
                                                bool is_value) {
  return is_value ? l.value_codes(kv_head, slot) : l.key_codes(kv_head, slot);
}
__device__ __forceinline__ int64_t params_offset(const PageLayout& l, int kv_head, int slot,
                                                 int group, bool is_value) {
  return is_value ? l.value_params(kv_head, slot, group) : l.key_params(kv_head, slot, group);
}

// One token's keys or values of one KV head in one layer, by one warp: lane l holds channels
// 4l..4l+3.
__device__ void migrate_row(const KvMigrateArgs& args, int layer, const MigrateTask task,
                            int kv_head, bool is_value) {
  const PageLayout& layout = args.layout;
  const int lane = threadIdx.x % 32;
  const int bits = layout.bits;
  const int lanes_per_group = int(layout.group_size) / 4;
  const auto [ids, slot] = token_slot(args, task);
  const uint2 raw =
      reinterpret_cast<const uint2*>(full_row(args, layer, ids, kv_head, slot, is_value))[lane];
  float x[4] = {__uint_as_float(raw.x << 16), __uint_as_float(raw.x & 0xffff0000u),
                __uint_as_float(raw.y << 16), __uint_as_float(raw.y & 0xffff0000u)};
  // The published clipping clamps the row first, then takes plain min/max per group.
  float ratio = is_value ? args.clip_ratio_v : args.clip_ratio_k;
  if (args.clip_mode == ClipMode::row_quantile) {
    clamp_row_at_quantile(x, 32, 0, lane, ratio);
    ratio = 1.0f;
  }
  float lo = fminf(fminf(x[0], x[1]), fminf(x[2], x[3]));
  float hi = fmaxf(fmaxf(x[0], x[1]), fmaxf(x[2], x[3]));
  lo = group_reduce(lo, lanes_per_group, [](float a, float b) { return fminf(a, b); });
  hi = group_reduce(hi, lanes_per_group, [](float a, float b) { return fmaxf(a, b); });
  const DeviceParams p = args.lloyd_max
                             ? lloyd_max_row(x, layout.param_format, args.q8_scales)
                             : choose_params(x, lo, hi, lanes_per_group, bits, ratio,
                                             args.clip_search, layout.param_format, args.q8_scales);
  std::byte* page = quantized_page(args, layer, ids);
  std::byte* codes = page + codes_offset(layout, kv_head, slot, is_value);
  int packed = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) packed |= quantize_code(x[i], p, bits) << (i * bits);
  if (bits == 2) {
    reinterpret_cast<uint8_t*>(codes)[lane] = uint8_t(packed);
  } else {
    reinterpret_cast<uint16_t*>(codes)[lane] = uint16_t(packed);
  }
  if (lane % lanes_per_group == 0) {
    const int group = lane / lanes_per_group;
    const int64_t offset = params_offset(layout, kv_head, slot, group, is_value);
    store_params(p, layout.param_format, args.q8_scales, reinterpret_cast<uint8_t*>(page + offset));
  }
}

// Keys left to the kernels below: quantized per channel (KIVI) or with error feedback. (Values with
// error feedback are too.)
__host__ __device__ bool keys_elsewhere(const KvMigrateArgs& args) {
  return args.layout.keys_per_channel || args.key_feedback != nullptr;
}

// The step's (layer, token, KV head, keys or values) rows left to the kernels below (the band's
// copies when args.band), `worker` of `workers` taking every workers-th: `row(layer, task,
// kv_head, is_value)` for each.
template <class Row>
__device__ __forceinline__ void for_each_migrated_row(const KvMigrateArgs& args, int worker,
                                                      int workers, const Row& row) {
  const bool skip_keys = keys_elsewhere(args), skip_values = args.value_feedback != nullptr;
  const int tasks = args.band ? args.counts->band_migrate_tasks : args.counts->migrate_tasks;
  const int units_per_layer = tasks * args.num_kv_heads * 2;
  const int units = units_per_layer * args.num_layers;
  for (int global_unit = worker; global_unit < units; global_unit += workers) {
    const int layer = global_unit / units_per_layer, unit = global_unit % units_per_layer;
    const bool is_value = unit % 2 == 1;
    if (is_value ? skip_values : skip_keys) continue;
    row(layer, args.tasks[unit / (2 * args.num_kv_heads)], (unit / 2) % args.num_kv_heads,
        is_value);
  }
}

// One warp a row.
__global__ void migrate_tokens_kernel(const KvMigrateArgs args) {
  for_each_migrated_row(args, int(blockIdx.x) * kWarpsPerBlock + int(threadIdx.x) / 32,
                        int(gridDim.x) * kWarpsPerBlock,
                        [&](int layer, const MigrateTask& task, int kv_head, bool is_value) {
                          migrate_row(args, layer, task, kv_head, is_value);
                        });
}

// Rows rounded to nearest with a clip ratio (the band's copies; the formats without error
// feedback, clip search or the published quantizer), four lanes a row: lane q of the four holds
// channels 32q..32q+31, within one group (groups are 32, 64 or 128 channels), and stores their
// codes as one vector, aligned as the dequantization's chunks (dequantize_chunks.h). A warp a row
// (migrate_row) kept each row's dependent steps (loads, reductions, parameters, stores) to one
// row per warp at a time; here a warp has eight rows in flight.
constexpr int kNearestRowLanes = 4;
constexpr int kNearestLaneChannels = kHeadDim / kNearestRowLanes;
constexpr int kNearestThreads = 128;
constexpr int kNearestRowsPerBlock = kNearestThreads / kNearestRowLanes;
constexpr int kMaxNearestBlocks = 8192;  // a grid-stride loop past them
static_assert(kNearestLaneChannels == kDequantizeChunkChannels, "a lane's codes are one chunk's");

bool nearest_rows(const KvMigrateArgs& args) {
  return args.clip_mode == ClipMode::range_scale && !args.clip_search && !args.lloyd_max &&
         (args.layout.bits == 2 || args.layout.bits == 4);
}

// One token's keys or values of one KV head, by its four lanes (`quarter`: 0..3; `mask`: the
// four lanes').
template <int kBits>
__device__ void migrate_nearest_row(const KvMigrateArgs& args, int layer, const MigrateTask task,
                                    int kv_head, bool is_value, int quarter, unsigned mask) {
  const PageLayout& layout = args.layout;
  const auto [ids, slot] = token_slot(args, task);
  const uint4* full = full_row(args, layer, ids, kv_head, slot, is_value);
  float x[kNearestLaneChannels];
#pragma unroll
  for (int v = 0; v < kNearestLaneChannels / 8; ++v) {
    unpack_bf16x8(full[quarter * kNearestLaneChannels / 8 + v], x + 8 * v);
  }
  float lo = x[0], hi = x[0];
#pragma unroll
  for (int i = 1; i < kNearestLaneChannels; ++i) {
    lo = fminf(lo, x[i]);
    hi = fmaxf(hi, x[i]);
  }
  const int lanes_per_group = int(layout.group_size) / kNearestLaneChannels;
  for (int offset = 1; offset < lanes_per_group; offset *= 2) {
    lo = fminf(lo, __shfl_xor_sync(mask, lo, offset, kNearestRowLanes));
    hi = fmaxf(hi, __shfl_xor_sync(mask, hi, offset, kNearestRowLanes));
  }
  const float ratio = is_value ? args.clip_ratio_v : args.clip_ratio_k;
  const DeviceParams p =
      params_for_range(lo * ratio, hi * ratio, kBits, layout.param_format, args.q8_scales);
  uint32_t words[kBits] = {};
#pragma unroll
  for (int i = 0; i < kNearestLaneChannels; ++i) {
    words[i * kBits / 32] |= uint32_t(quantize_code(x[i], p, kBits)) << (i * kBits % 32);
  }
  // Stored as kv_dequantize.cu loads them: chunk `quarter` of the row, one vector.
  using Vector = typename ChunkCodes<kBits>::Vector;
  Vector vector;
  memcpy(&vector, words, sizeof(vector));
  std::byte* page = quantized_page(args, layer, ids);
  std::byte* codes =
      page + codes_offset(layout, kv_head, slot, is_value) + quarter * int(sizeof(vector));
  *reinterpret_cast<Vector*>(codes) = vector;
  if (quarter % lanes_per_group == 0) {
    const int group = quarter / lanes_per_group;
    const int64_t offset = params_offset(layout, kv_head, slot, group, is_value);
    store_params(p, layout.param_format, args.q8_scales, reinterpret_cast<uint8_t*>(page + offset));
  }
}

// Four lanes a row.
template <int kBits>
__global__ void migrate_nearest_rows_kernel(const KvMigrateArgs args) {
  const int quarter = int(threadIdx.x) % kNearestRowLanes;
  const unsigned mask = 0xfu << (threadIdx.x % 32 / kNearestRowLanes * kNearestRowLanes);
  for_each_migrated_row(
      args, int(blockIdx.x) * kNearestRowsPerBlock + int(threadIdx.x) / kNearestRowLanes,
      int(gridDim.x) * kNearestRowsPerBlock,
      [&](int layer, const MigrateTask& task, int kv_head, bool is_value) {
        migrate_nearest_row<kBits>(args, layer, task, kv_head, is_value, quarter, mask);
      });
}

// Keys and values with error feedback: round_with_feedback (quant/error_feedback.cpp) mirrored
// operation for operation (explicitly rounded float operations keep nvcc from fusing what the CPU
// computes as separate steps, so the codes are the CPU's). A token's 128 steps depend on each other
// and most of a step is the one channel's rounding: with a warp per token, 31 lanes idled through
// it. Half a warp holds a token (lane r of the 16:
// channels 8r..8r+7): in step j every lane rounds its channel j % 8, the owner's error goes to the
// token's lanes, and each updates its 8 channels. Eight channels keep the loop body (8 unrolled
// steps) small: with 32 channels a lane, the unrolled body outgrew the instruction cache and the
// warps waited on instruction fetch more than on anything else.
constexpr int kLanesPerToken = 16;
constexpr int kChannelsPerLane = kHeadDim / kLanesPerToken;
constexpr int kTokensPerWarp = 32 / kLanesPerToken;
// Warps of a block: prefill chunks (with the published row-quantile clipping; with range-scale
// clipping a thread per row runs them, below) take 12, so that the three blocks a multiprocessor
// holds (their staged factors fill its shared memory) give it 36 warps to hide the chain's latency
// with, the registers capped to fit them (__launch_bounds__ below; 24 warps of 8-warp blocks were
// slower); decode steps, whose few tokens fill few warps, 4.
constexpr int kPrefillFeedbackWarps = 12;
constexpr int kPrefillFeedbackBlocks = 3;
constexpr int kDecodeFeedbackWarps = 4;
// The factor in shared memory: row j's 16 segments of 8 channels, with 16 bytes between each four,
// so the eight lanes of a quarter warp, reading eight segments of a row, hit different banks.
constexpr int segment_offset(int r) {
  return r * kChannelsPerLane + r / 4 * 4;
}  // floats
constexpr int kRowFloats = segment_offset(kLanesPerToken);
constexpr int kStagedBytes = kHeadDim * kRowFloats * int(sizeof(float));
constexpr int kMaxFeedbackBlocks = 4096;

// One token's keys or values, by its 16 lanes; `store`: false for the lanes of a warp's unused
// token slot, which still take part in the shuffles. kBits: 2 or 4, a constant so the codes pack in
// registers.
template <int kBits>
__device__ void migrate_fed_back_row(const KvMigrateArgs& args, int layer, const MigrateTask task,
                                     bool store, int kv_head, bool is_value, const float* factor,
                                     int lane) {
  const PageLayout& layout = args.layout;
  const int r = lane % kLanesPerToken;
  const int lanes_per_group = int(layout.group_size) / kChannelsPerLane;
  const auto [ids, slot] = token_slot(args, task);
  const uint4 raw = full_row(args, layer, ids, kv_head, slot, is_value)[r];
  float running[kChannelsPerLane];
  unpack_bf16x8(raw, running);
  const int token_base = lane & ~(kLanesPerToken - 1);
  float ratio = is_value ? args.clip_ratio_v : args.clip_ratio_k;
  if (args.clip_mode == ClipMode::row_quantile) {  // the published clipping, as in migrate_row
    clamp_row_at_quantile(running, kLanesPerToken, token_base, r, ratio);
    ratio = 1.0f;
  }
  float lo = running[0], hi = running[0];
#pragma unroll
  for (int c = 1; c < kChannelsPerLane; ++c) {
    lo = fminf(lo, running[c]);
    hi = fmaxf(hi, running[c]);
  }
  lo = group_reduce(lo, lanes_per_group, [](float a, float b) { return fminf(a, b); });
  hi = group_reduce(hi, lanes_per_group, [](float a, float b) { return fmaxf(a, b); });
  const DeviceParams p = choose_params(running, lo, hi, lanes_per_group, kBits, ratio,
                                       args.clip_search, layout.param_format, args.q8_scales);
  const float inverse_scale = __frcp_rn(p.scale);  // the CPU's 1.0f / scale
  constexpr float kMaxCode = float((1 << kBits) - 1);
  const float* segment = factor + segment_offset(r);
  uint32_t packed = 0;
  for (int owner = 0; owner < kLanesPerToken; ++owner) {
#pragma unroll
    for (int c = 0; c < kChannelsPerLane; ++c) {
      // Every lane rounds its channel c; the owner's (channel j) is the one the chain takes.
      const float code = fminf(
          fmaxf(rintf(__fmul_rn(__fsub_rn(running[c], p.zero), inverse_scale)), 0.0f), kMaxCode);
      const float error = __shfl_sync(
          0xffffffffu, __fsub_rn(running[c], __fadd_rn(__fmul_rn(code, p.scale), p.zero)),
          token_base | owner);
      if (r == owner) packed |= uint32_t(code) << (c * kBits);
      // The CPU updates the channels l > j only; the others' codes are already taken (G[j][l] = 0
      // for l < j), so updating them too changes no code and keeps the lanes in step.
      const float4* row =
          reinterpret_cast<const float4*>(segment + (owner * kChannelsPerLane + c) * kRowFloats);
#pragma unroll
      for (int k = 0; k < kChannelsPerLane / 4; ++k) {
        const float4 f = row[k];
        running[4 * k] = __fmaf_rn(-error, f.x, running[4 * k]);
        running[4 * k + 1] = __fmaf_rn(-error, f.y, running[4 * k + 1]);
        running[4 * k + 2] = __fmaf_rn(-error, f.z, running[4 * k + 2]);
        running[4 * k + 3] = __fmaf_rn(-error, f.w, running[4 * k + 3]);
      }
    }
  }
  if (!store) return;
  std::byte* page = quantized_page(args, layer, ids);
  std::byte* codes = page + codes_offset(layout, kv_head, slot, is_value);
  if constexpr (kBits == 2) {
    reinterpret_cast<uint16_t*>(codes)[r] = uint16_t(packed);
  } else {
    reinterpret_cast<uint32_t*>(codes)[r] = packed;
  }
  if (r % lanes_per_group == 0) {
    const int group = r / lanes_per_group;
    store_params(
        p, layout.param_format, args.q8_scales,
        reinterpret_cast<uint8_t*>(page + params_offset(layout, kv_head, slot, group, is_value)));
  }
}

// Blocks per (layer, KV head), as many as the step's tokens need (a prefill chunk's hundreds), each
// staging the head's factor once; blockIdx.y: keys, then values (or values alone).
template <int Warps>
__global__ void __launch_bounds__(Warps * 32,
                                  Warps == kPrefillFeedbackWarps ? kPrefillFeedbackBlocks : 0)
    migrate_fed_back_rows_kernel(const KvMigrateArgs args) {
  constexpr int kTokensPerBlock = Warps * kTokensPerWarp;
  extern __shared__ float4 staged[];
  const int tasks = args.counts->migrate_tasks;
  const int heads = args.num_layers * args.num_kv_heads;  // blocks: (layer, KV head) x token block
  const int head = int(blockIdx.x) % heads, token_block = int(blockIdx.x) / heads;
  const int token_blocks = int(gridDim.x) / heads;
  if (token_block * kTokensPerBlock >= tasks) return;  // the whole block: no token for it this step
  const int layer = head / args.num_kv_heads, kv_head = head % args.num_kv_heads;
  const bool is_value = args.key_feedback == nullptr || blockIdx.y == 1;
  const auto* factor = reinterpret_cast<const float4*>(
      (is_value ? args.value_feedback : args.key_feedback) + int64_t(head) * kHeadDim * kHeadDim);
  // All copies in flight at once (a loop of load-then-store waited on memory once per iteration).
  // G[j][l] = 0 for l < j: segments left of the diagonal's are zeros, written, not read.
  constexpr int kVectorsPerSegment = kChannelsPerLane / 4;
  const uint32_t base = shared_address(staged);
  for (int i = threadIdx.x; i < kHeadDim * kHeadDim / 4; i += blockDim.x) {
    const int j = i / (kHeadDim / 4), segment = i % (kHeadDim / 4) / kVectorsPerSegment,
              k = i % kVectorsPerSegment;
    const int to = (j * kRowFloats + segment_offset(segment)) / 4 + k;
    if (segment >= j / kChannelsPerLane) {
      cp_async_16(base + to * 16, factor + i);
    } else {
      staged[to] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
  }
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  for (int first = (token_block * Warps + warp) * kTokensPerWarp; first < tasks;
       first += token_blocks * kTokensPerBlock) {
    const int t = first + lane / kLanesPerToken;
    const MigrateTask task = args.tasks[min(t, tasks - 1)];
    const auto* staged_factor = reinterpret_cast<const float*>(staged);
    if (args.layout.bits == 2) {
      migrate_fed_back_row<2>(args, layer, task, t < tasks, kv_head, is_value, staged_factor, lane);
    } else {
      migrate_fed_back_row<4>(args, layer, task, t < tasks, kv_head, is_value, staged_factor, lane);
    }
  }
}

// Prefill chunks' keys and values with error feedback (range-scale clipping), a thread per row:
// round_with_feedback (quant/error_feedback.cpp) as the CPU runs it, one channel after another,
// with the row in registers. The 16-lane kernel above keeps its lanes in step, so every lane
// rounds a channel and updates all 8 of its channels at each of the 128 steps; here a row costs
// its own channels' roundings and, per segment of 8 channels, the updates of the channels after
// it. Registers are indexed statically: after each segment the row shifts down by 8, so the
// current segment is always running[0..7]. The first 8 segments update 120 registers, the last 8
// only 56 (the live channels fit in 64 by then); registers past the live ones hold garbage from
// factor entries past a row's end, and are never read as channels. Each channel l still takes the
// updates of j = 0..l-1 in order, one fma each, as on the CPU.
constexpr int kRowThreads = 128;
constexpr int kRowBlocksPerMultiprocessor = 2;
constexpr int kSegment = 8;
// The last row's tail update reads up to 56 floats past the factor: zeros.
constexpr int kFactorPadding = 64;
constexpr int kRowFactorBytes = (kHeadDim * kHeadDim + kFactorPadding) * int(sizeof(float));

// One segment: its 8 channels rounded in order (each error applied to the segment's later
// channels at once), then the 8 errors applied to the `Live` - 8 registers after it, and the row
// shifted down by 8. `factor`: G[first][first], the segment's first channel's diagonal entry.
template <int kBits, int Live>
__device__ __forceinline__ uint32_t feedback_segment(float (&running)[kHeadDim],
                                                     const float* factor, DeviceParams p,
                                                     float inverse_scale) {
  constexpr float kMaxCode = float((1 << kBits) - 1);
  float error[kSegment];
  uint32_t packed = 0;
#pragma unroll
  for (int jj = 0; jj < kSegment; ++jj) {
    const float code = fminf(
        fmaxf(rintf(__fmul_rn(__fsub_rn(running[jj], p.zero), inverse_scale)), 0.0f), kMaxCode);
    error[jj] = __fsub_rn(running[jj], __fadd_rn(__fmul_rn(code, p.scale), p.zero));
    packed |= uint32_t(code) << (jj * kBits);
    const float* row = factor + jj * kHeadDim;
#pragma unroll
    for (int kk = jj + 1; kk < kSegment; ++kk)
      running[kk] = __fmaf_rn(-error[jj], row[kk], running[kk]);
  }
  // Four channels at a time, each taking the 8 errors in order.
#pragma unroll
  for (int q = 0; q < (Live - kSegment) / 4; ++q) {
    float* r = running + kSegment + 4 * q;
#pragma unroll
    for (int jj = 0; jj < kSegment; ++jj) {
      const float4 g = reinterpret_cast<const float4*>(factor + jj * kHeadDim + kSegment)[q];
      r[0] = __fmaf_rn(-error[jj], g.x, r[0]);
      r[1] = __fmaf_rn(-error[jj], g.y, r[1]);
      r[2] = __fmaf_rn(-error[jj], g.z, r[2]);
      r[3] = __fmaf_rn(-error[jj], g.w, r[3]);
    }
  }
#pragma unroll
  for (int kk = 0; kk < Live - kSegment; ++kk) running[kk] = running[kk + kSegment];
  return packed;
}

// One row: its group parameters (choose_group_params, with the CPU's summation order for the clip
// search), then the 16 segments, each segment's codes stored as it ends.
template <int kBits, int kGroup>
__device__ void migrate_fed_back_thread_row(const KvMigrateArgs& args, int layer,
                                            const MigrateTask task, int kv_head, bool is_value,
                                            const float* factor) {
  constexpr int kGroups = kHeadDim / kGroup;
  const PageLayout& layout = args.layout;
  const auto [ids, slot] = token_slot(args, task);
  const uint4* raw = full_row(args, layer, ids, kv_head, slot, is_value);
  float running[kHeadDim];
#pragma unroll
  for (int v = 0; v < kHeadDim / 8; ++v) unpack_bf16x8(raw[v], running + 8 * v);
  const float ratio = is_value ? args.clip_ratio_v : args.clip_ratio_k;
  DeviceParams params[kGroups];
#pragma unroll
  for (int g = 0; g < kGroups; ++g) {
    float lo = running[g * kGroup], hi = running[g * kGroup];
#pragma unroll
    for (int c = 1; c < kGroup; ++c) {
      lo = fminf(lo, running[g * kGroup + c]);
      hi = fmaxf(hi, running[g * kGroup + c]);
    }
    if (!args.clip_search) {
      params[g] =
          params_for_range(lo * ratio, hi * ratio, kBits, layout.param_format, args.q8_scales);
      continue;
    }
    double best_error = 0.0;
    for (int k = 0; k < kClipCandidateCount; ++k) {
      const float candidate = clip_candidate(k);
      const DeviceParams p = params_for_range(lo * candidate, hi * candidate, kBits,
                                              layout.param_format, args.q8_scales);
      double error = 0.0;
#pragma unroll
      for (int c = 0; c < kGroup; ++c) {
        const float x = running[g * kGroup + c];
        const double diff =
            double(x) - double(float(quantize_code(x, p, kBits)) * p.scale + p.zero);
        error += diff * diff;
      }
      if (k == 0 || error < best_error) {
        params[g] = p;
        best_error = error;
      }
    }
  }
  std::byte* page = quantized_page(args, layer, ids);
  std::byte* codes = page + codes_offset(layout, kv_head, slot, is_value);
#pragma unroll
  for (int g = 0; g < kGroups; ++g) {
    store_params(
        params[g], layout.param_format, args.q8_scales,
        reinterpret_cast<uint8_t*>(page + params_offset(layout, kv_head, slot, g, is_value)));
  }
  // The segment's group: a static choice among the row's few parameters.
  auto group_params = [&](int segment) {
    DeviceParams p = params[0];
#pragma unroll
    for (int g = 1; g < kGroups; ++g) {
      if (segment * kSegment >= g * kGroup) p = params[g];
    }
    return p;
  };
  auto store_codes = [&](int segment, uint32_t packed) {
    if constexpr (kBits == 2) {
      reinterpret_cast<uint16_t*>(codes)[segment] = uint16_t(packed);
    } else {
      reinterpret_cast<uint32_t*>(codes)[segment] = packed;
    }
  };
  constexpr int kSegments = kHeadDim / kSegment;
#pragma unroll 1
  for (int segment = 0; segment < kSegments / 2; ++segment) {
    const DeviceParams p = group_params(segment);
    store_codes(segment,
                feedback_segment<kBits, kHeadDim>(
                    running, factor + segment * kSegment * (kHeadDim + 1), p, __frcp_rn(p.scale)));
  }
#pragma unroll 1
  for (int segment = kSegments / 2; segment < kSegments; ++segment) {
    const DeviceParams p = group_params(segment);
    store_codes(segment,
                feedback_segment<kBits, kHeadDim / 2>(
                    running, factor + segment * kSegment * (kHeadDim + 1), p, __frcp_rn(p.scale)));
  }
}

// Blocks as in migrate_fed_back_rows_kernel: per (layer, KV head) x token block, blockIdx.y keys
// then values; each stages its factor once, then a thread per token.
template <int kBits, int kGroup>
__global__ void __launch_bounds__(kRowThreads, kRowBlocksPerMultiprocessor)
    migrate_fed_back_thread_rows_kernel(const KvMigrateArgs args) {
  extern __shared__ float4 staged_rows[];
  const int tasks = args.counts->migrate_tasks;
  const int heads = args.num_layers * args.num_kv_heads;
  const int head = int(blockIdx.x) % heads, token_block = int(blockIdx.x) / heads;
  const int token_blocks = int(gridDim.x) / heads;
  if (token_block * kRowThreads >= tasks) return;
  const int layer = head / args.num_kv_heads, kv_head = head % args.num_kv_heads;
  const bool is_value = args.key_feedback == nullptr || blockIdx.y == 1;
  const auto* factor = reinterpret_cast<const float4*>(
      (is_value ? args.value_feedback : args.key_feedback) + int64_t(head) * kHeadDim * kHeadDim);
  const uint32_t base = shared_address(staged_rows);
  for (int i = int(threadIdx.x); i < kHeadDim * kHeadDim / 4; i += kRowThreads)
    cp_async_16(base + i * 16, factor + i);
  for (int i = int(threadIdx.x); i < kFactorPadding / 4; i += kRowThreads)
    staged_rows[kHeadDim * kHeadDim / 4 + i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  const auto* staged_factor = reinterpret_cast<const float*>(staged_rows);
  for (int t = token_block * kRowThreads + int(threadIdx.x); t < tasks;
       t += token_blocks * kRowThreads) {
    migrate_fed_back_thread_row<kBits, kGroup>(args, layer, args.tasks[t], kv_head, is_value,
                                               staged_factor);
  }
}

// The error-feedback kernels' grid: (layer, KV head) x token blocks of `tokens_per_block`, as many
// as the step's tasks need up to kMaxFeedbackBlocks in all; blockIdx.y keys then values.
dim3 feedback_grid(const KvMigrateArgs& args, int64_t max_tasks, int64_t tokens_per_block,
                   unsigned kinds) {
  const int64_t heads = int64_t(args.num_layers) * args.num_kv_heads;
  const int64_t token_blocks =
      std::clamp<int64_t>((max_tasks + tokens_per_block - 1) / tokens_per_block, 1,
                          std::max<int64_t>(1, kMaxFeedbackBlocks / heads));
  return dim3(unsigned(heads * token_blocks), kinds);
}

template <int kBits, int kGroup>
void launch_fed_back_thread_rows(const KvMigrateArgs& args, int64_t max_tasks, unsigned kinds,
                                 cudaStream_t stream) {
  const auto kernel = migrate_fed_back_thread_rows_kernel<kBits, kGroup>;
  allow_dynamic_shared_memory(reinterpret_cast<const void*>(kernel), kRowFactorBytes,
                              "cudaFuncSetAttribute(migrate_fed_back_thread_rows_kernel)");
  kernel<<<feedback_grid(args, max_tasks, kRowThreads, kinds), kRowThreads, kRowFactorBytes,
           stream>>>(args);
  check_launch("migrate_fed_back_thread_rows_kernel");
}

// The thread-per-row kernel's instances: range-scale clipping, 2 or 4 bits, groups of 32, 64 or
// 128 channels. False where the 16-lane kernel has to run.
bool launch_fed_back_thread_rows(const KvMigrateArgs& args, int64_t max_tasks, unsigned kinds,
                                 cudaStream_t stream) {
  const PageLayout& layout = args.layout;
  if (args.clip_mode != ClipMode::range_scale || (layout.bits != 2 && layout.bits != 4)) {
    return false;
  }
  const bool two = layout.bits == 2;
  switch (layout.group_size) {
    case 32:
      two ? launch_fed_back_thread_rows<2, 32>(args, max_tasks, kinds, stream)
          : launch_fed_back_thread_rows<4, 32>(args, max_tasks, kinds, stream);
      return true;
    case 64:
      two ? launch_fed_back_thread_rows<2, 64>(args, max_tasks, kinds, stream)
          : launch_fed_back_thread_rows<4, 64>(args, max_tasks, kinds, stream);
      return true;
    case 128:
      two ? launch_fed_back_thread_rows<2, 128>(args, max_tasks, kinds, stream)
          : launch_fed_back_thread_rows<4, 128>(args, max_tasks, kinds, stream);
      return true;
    default:
      return false;
  }
}

// KIVI keys: one block per (layer, token group, KV head), thread c = channel; every channel of the
// group's tokens shares one (scale, zero).
__global__ void migrate_key_groups_kernel(const KvMigrateArgs args) {
  const PageLayout& layout = args.layout;
  const int c = threadIdx.x;
  const int bits = layout.bits;
  const int units_per_layer = args.counts->key_group_tasks * args.num_kv_heads;
  const int units = units_per_layer * args.num_layers;
  for (int global_unit = blockIdx.x; global_unit < units; global_unit += gridDim.x) {
    const int layer = global_unit / units_per_layer, unit = global_unit % units_per_layer;
    const KeyGroupTask task = args.key_groups[unit / args.num_kv_heads];
    const int kv_head = unit % args.num_kv_heads;
    const PageIds ids = args.page_table[task.page_table + task.first / layout.page_size_tokens];
    const int first_slot = task.first % layout.page_size_tokens;
    const std::byte* full =
        layer_full_pages(args, layer) + int64_t(ids.full) * layout.full_page_bytes;
    auto key = [&](int t) {
      const auto* row =
          reinterpret_cast<const uint16_t*>(full + layout.full_key_offset(kv_head, first_slot + t));
      return __uint_as_float(uint32_t(row[c]) << 16);
    };
    float lo = INFINITY, hi = -INFINITY;
    for (int t = 0; t < task.count; ++t) {
      lo = fminf(lo, key(t));
      hi = fmaxf(hi, key(t));
    }
    DeviceParams p{};
    if (!args.clip_search) {
      p = params_for_range(lo * args.clip_ratio_k, hi * args.clip_ratio_k, bits,
                           layout.param_format, args.q8_scales);
    } else {
      double best_error = 0.0;
      for (int k = 0; k < kClipCandidateCount; ++k) {
        const DeviceParams candidate =
            params_for_range(lo * clip_candidate(k), hi * clip_candidate(k), bits,
                             layout.param_format, args.q8_scales);
        double error = 0.0;
        for (int t = 0; t < task.count; ++t) {
          const float x = key(t);
          const double diff =
              double(x) -
              double(float(quantize_code(x, candidate, bits)) * candidate.scale + candidate.zero);
          error += diff * diff;
        }
        if (k == 0 || error < best_error) {
          p = candidate;
          best_error = error;
        }
      }
    }
    std::byte* page = quantized_page(args, layer, ids);
    store_params(p, layout.param_format, args.q8_scales,
                 reinterpret_cast<uint8_t*>(page + layout.key_params(kv_head, first_slot, c)));
    const int per_byte = 8 / bits;
    for (int t = 0; t < task.count; ++t) {
      int bits_here = quantize_code(key(t), p, bits) << ((c % per_byte) * bits);
      for (int offset = 1; offset < per_byte; offset *= 2)
        bits_here |= __shfl_xor_sync(0xffffffffu, bits_here, offset);
      if (c % per_byte == 0) {
        reinterpret_cast<uint8_t*>(page + layout.key_codes(kv_head, first_slot + t))[c / per_byte] =
            uint8_t(bits_here);
      }
    }
  }
}

template <int Warps>
void launch_fed_back_rows(const KvMigrateArgs& args, int64_t max_tasks, unsigned kinds,
                          cudaStream_t stream) {
  allow_dynamic_shared_memory(reinterpret_cast<const void*>(migrate_fed_back_rows_kernel<Warps>),
                              kStagedBytes, "cudaFuncSetAttribute(migrate_fed_back_rows_kernel)");
  const dim3 grid = feedback_grid(args, max_tasks, Warps * kTokensPerWarp, kinds);
  migrate_fed_back_rows_kernel<Warps><<<grid, 32 * Warps, kStagedBytes, stream>>>(args);
  check_launch("migrate_fed_back_rows_kernel");
}

}  // namespace

void launch_kv_migrate(const KvMigrateArgs& args, int64_t max_tasks, int64_t max_key_groups,
                       cudaStream_t stream) {
  if (args.layout.bits == 0) return;
  if (max_tasks > 0) {
    if (!keys_elsewhere(args) || args.value_feedback == nullptr) {
      const int64_t units = max_tasks * args.num_kv_heads * 2 * args.num_layers;
      if (nearest_rows(args)) {
        const int64_t blocks = std::min<int64_t>(
            (units + kNearestRowsPerBlock - 1) / kNearestRowsPerBlock, kMaxNearestBlocks);
        const auto kernel =
            args.layout.bits == 2 ? migrate_nearest_rows_kernel<2> : migrate_nearest_rows_kernel<4>;
        kernel<<<unsigned(blocks), kNearestThreads, 0, stream>>>(args);
        check_launch("migrate_nearest_rows_kernel");
      } else {
        const int64_t blocks =
            std::min<int64_t>((units + kWarpsPerBlock - 1) / kWarpsPerBlock, 4096);
        migrate_tokens_kernel<<<unsigned(blocks), 32 * kWarpsPerBlock, 0, stream>>>(args);
        check_launch("migrate_tokens_kernel");
      }
    }
    const unsigned kinds =
        unsigned(args.key_feedback != nullptr) + unsigned(args.value_feedback != nullptr);
    if (kinds > 0) {
      if (max_tasks <= 64) {
        launch_fed_back_rows<kDecodeFeedbackWarps>(args, max_tasks, kinds, stream);
      } else if (!launch_fed_back_thread_rows(args, max_tasks, kinds, stream)) {
        launch_fed_back_rows<kPrefillFeedbackWarps>(args, max_tasks, kinds, stream);
      }
    }
  }
  if (max_key_groups > 0) {
    const int64_t blocks =
        std::min<int64_t>(max_key_groups * args.num_kv_heads * args.num_layers, 4096);
    migrate_key_groups_kernel<<<unsigned(blocks), kHeadDim, 0, stream>>>(args);
    check_launch("migrate_key_groups_kernel");
  }
}

}  // namespace oscar::cuda
