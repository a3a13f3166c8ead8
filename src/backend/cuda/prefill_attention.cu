// Flash attention for prefill chunks on the tensor cores (wgmma, sm_90a): causal, GQA, bf16
// operands, float32 accumulation and online softmax. One block per (block item, KV head): 128 query
// rows (the item's tokens x the group's query heads, token-major), two warpgroups of 64 rows each,
// against tiles of 128 keys that a third warpgroup copies by TMA into three-stage rings of keys and
// of values (a key stage is free again once its scores are computed); each warpgroup's softmax of a
// tile runs while the tensor cores weigh the values of the tile before.
//
// Under the decode rule (kvcache/kv_cache_config.h, as cpu_attention and the float kernel apply
// it), a tile is visited once per format some row reads from it (a "job", prefill_jobs.h); the
// 2-bit and band keys come from their bf16 copies (kv_dequantize.cu), so every job reads bf16
// pages. Scores are masked per element only where some (row, key) pair of the job is not read in
// its format; elsewhere the whole tile is read.
//
// Queries come rotated by R_K like the stored keys (AttentionArgs::queries), or as the q|k|v rows
// hold them (prefill_queries), rotated here: three bf16 products of the queries' and R_K's high
// and low parts on the tensor cores, into the block's query tiles, while the first tile is
// copied. The KV write then has no queries to rotate on its fma chains, which it does exactly as
// the CPU for the keys because keys are quantized; queries are not.
#include "backend/cuda/kernel_sizes.h"
#include "backend/cuda/prefill_attention.h"

#include <cuda_bf16.h>

#include <string>

#include "backend/cuda/bulk_copy.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/page_tensor_map.h"
#include "backend/cuda/prefill_jobs.h"
#include "backend/cuda/warp_primitives.cuh"
#include "backend/cuda/wgmma.cuh"

namespace oscar::cuda {
namespace {

constexpr int kRows = static_cast<int>(kTensorCoreBlockRows);
constexpr int kKeys = kPrefillTileKeys;
constexpr int kConsumerThreads = 256;             // two warpgroups of 64 query rows
constexpr int kThreads = kConsumerThreads + 128;  // and one that copies the tiles
constexpr int kStages = 3;
constexpr int kHalfRowBytes = 128;                    // 64 bf16 channels
constexpr int kKeyHalfBytes = kKeys * kHalfRowBytes;  // one 64-channel half of a key tile
constexpr int kTileBytes = 2 * kKeyHalfBytes;         // a tile of keys (or values)
constexpr int kQueryHalfBytes = 64 * kHalfRowBytes;   // one half of a warpgroup's 64 query rows
constexpr int kQueryBytes = kRows * kHeadDim * 2;
constexpr int kKeysOffset = kQueryBytes;
constexpr int kValuesOffset = kKeysOffset + kStages * kTileBytes;
// Four rings of barriers, one per stage each: a stage's keys landed, its values landed, its keys
// were read, its values were read. Keys are released as soon as a job's scores are computed.
constexpr int kBarriersOffset = kValuesOffset + kStages * kTileBytes;
// And one more: both warpgroups have rotated their queries (rotate_queries), whose operands lie in
// stage 1's values and stage 2, so the copying thread may write there.
constexpr int kRotationBarrierOffset = kBarriersOffset + 4 * 8 * kStages;
constexpr int kSharedBytes = kRotationBarrierOffset + 8;
constexpr int kSharedAlignment = 1024;  // the swizzle atoms' alignment
// Registers a thread of each role keeps (setmaxnreg): the copying warpgroup needs few.
constexpr int kConsumerRegisters = 232;
constexpr int kProducerRegisters = 40;
static_assert(2 * 128 * kConsumerRegisters + 128 * kProducerRegisters <= 65536,
              "the register file");

static_assert(kRows == 2 * 64, "two warpgroups of 64 query rows");
static_assert(kQueryBytes == kTileBytes, "a stage's values hold the queries' low parts");
// Named barriers beside 0 (__syncthreads) and 1 (the consumers' queries): warpgroup w syncs on
// kWarpgroupBarrier + w before its rotated rows are read.
constexpr int kWarpgroupBarrier = 2;

// A row of the block as the masks need it (position -1: a padding row, never written).
struct RowBounds {
  int position, quantized_end, band_begin;
};

__device__ __forceinline__ RowBounds row_bounds(const AttentionArgs& a, const BlockItem& item,
                                                int row) {
  const int token = row / a.group;
  if (row >= a.group * (kRows / a.group) || token >= item.row_count) return {-1, 0, 0};
  const QueryRow q = a.rows[item.first_row + token];
  return {q.position, q.quantized_end, q.band_begin};
}

// The block's queries, scaled into log2 units, as bf16 in the two warpgroups' swizzled tiles (by
// the consumer threads); with `low`, the bf16 rounding of what the first rounding left out, in
// tiles of the same layout there (the queries are rotated afterwards, rotate_queries). A thread's
// loads are all issued before its first store, so that it waits for memory once, not per load.
__device__ void load_queries(const AttentionArgs& a, const BlockItem& item, int kv_head,
                             std::byte* shared, std::byte* low) {
  constexpr int kVectorsPerRow = kHeadDim / 4;
  constexpr int kLoads = kRows * kVectorsPerRow / kConsumerThreads;
  static_assert(kRows * kVectorsPerRow % kConsumerThreads == 0, "whole loads per thread");
  const int rows_used = a.group * (kRows / a.group);
  float4 q[kLoads];
#pragma unroll
  for (int n = 0; n < kLoads; ++n) {
    const int i = int(threadIdx.x) + n * kConsumerThreads;
    const int row = i / kVectorsPerRow, vector = i % kVectorsPerRow;
    const int token = row / a.group, head = row % a.group;
    q[n] = make_float4(0.f, 0.f, 0.f, 0.f);
    if (row < rows_used && token < item.row_count) {
      const int64_t source_row = item.first_row + token, source_head = kv_head * a.group + head;
      const float* source =
          a.prefill_queries != nullptr
              ? a.prefill_queries + source_row * a.prefill_query_stride + source_head * kHeadDim
              : a.queries + (source_row * a.num_kv_heads * a.group + source_head) * kHeadDim;
      q[n] = reinterpret_cast<const float4*>(source)[vector];
    }
  }
  const float s = a.score_scale;
#pragma unroll
  for (int n = 0; n < kLoads; ++n) {
    const int i = int(threadIdx.x) + n * kConsumerThreads;
    const int row = i / kVectorsPerRow, vector = i % kVectorsPerRow;
    const int half = vector / 16, chunk = (vector % 16) / 2;
    const uint32_t offset = uint32_t((row / 64) * 2 * kQueryHalfBytes + half * kQueryHalfBytes) +
                            wgmma::swizzled_chunk(row % 64, chunk) + uint32_t(vector % 2) * 8;
    const float x[4] = {q[n].x * s, q[n].y * s, q[n].z * s, q[n].w * s};
    const uint32_t high[2] = {pack_bf16x2(x[0], x[1]), pack_bf16x2(x[2], x[3])};
    *reinterpret_cast<uint2*>(shared + offset) = make_uint2(high[0], high[1]);
    if (low != nullptr) {
      float rest[4];
#pragma unroll
      for (int k = 0; k < 2; ++k) {
        const float2 kept = unpack_bf16x2(high[k]);
        rest[2 * k] = x[2 * k] - kept.x;
        rest[2 * k + 1] = x[2 * k + 1] - kept.y;
      }
      *reinterpret_cast<uint2*>(low + offset) =
          make_uint2(pack_bf16x2(rest[0], rest[1]), pack_bf16x2(rest[2], rest[3]));
    }
  }
}

// The boxes of a job's tile, BoxRows keys each (page_tensor_map_rows: a box never spans two
// pages): each box's first row in the tensor map, or -1 where the box is outside the item's range
// or has no page in the job's format. Such boxes are not copied: their keys' weights are zero, and
// the stage holds finite values from earlier copies (it is zeroed at the start).
template <int BoxRows>
struct TileBoxes {
  static constexpr int kCount = kKeys / BoxRows;
  static constexpr int kBytes = 64 * BoxRows * 2;  // one box: 64 channels
  int rows[kCount];
  int copied;
};

template <int BoxRows>
__device__ TileBoxes<BoxRows> tile_boxes(const AttentionArgs& a, const BlockItem& item,
                                         const ItemBounds& b, int kv_head, Job job) {
  const PageLayout& layout = a.layout;
  const int page_rows = int(layout.page_size_tokens);
  TileBoxes<BoxRows> boxes;
  boxes.copied = 0;
#pragma unroll
  for (int box = 0; box < boxes.kCount; ++box) {
    const int first = job.tile + box * BoxRows;
    boxes.rows[box] = -1;
    if (first + BoxRows > b.key_begin && first < b.key_end) {
      const PageIds page = a.prefill_pages[item.prefill_table + first / page_rows];
      const int id = job.pages == KeyPages::full        ? page.full
                     : job.pages == KeyPages::quantized ? page.quantized
                                                        : page.band;
      if (id >= 0) {
        boxes.rows[box] =
            (id * 2 * int(layout.num_kv_heads) + kv_head) * page_rows + first % page_rows;
        ++boxes.copied;
      }
    }
  }
  return boxes;
}

// Starts the bulk copies of a tile's boxes (keys, or with `row_offset` a page's values) into one
// stage and arms the stage's barrier with their bytes.
template <int BoxRows>
__device__ void copy_tile(const CUtensorMap* map, const TileBoxes<BoxRows>& boxes, int row_offset,
                          uint32_t shared, uint32_t barrier) {
  bulk::arrive_expecting(barrier, uint32_t(boxes.copied * 2 * boxes.kBytes));
#pragma unroll
  for (int box = 0; box < boxes.kCount; ++box) {
    if (boxes.rows[box] < 0) continue;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const uint32_t offset = uint32_t(half * kKeyHalfBytes + box * BoxRows * kHalfRowBytes);
      bulk::copy_2d(shared + offset, map, half * 64, boxes.rows[box] + row_offset, barrier);
    }
  }
}

// Issues S = Q K^T (or with `accumulate` S += Q K^T) for the warpgroup's 64 rows and the stage's
// 128 keys (one wgmma group).
__device__ __forceinline__ void issue_scores(float (&s)[64], uint32_t queries, uint32_t keys,
                                             bool accumulate = false) {
#pragma unroll
  for (int k = 0; k < kHeadDim / 16; ++k) {
    const uint32_t query_step = uint32_t((k / 4) * kQueryHalfBytes + (k % 4) * 32);
    const uint32_t key_step = uint32_t((k / 4) * kKeyHalfBytes + (k % 4) * 32);
    wgmma::mma_m64n128k16_ss(s, wgmma::descriptor(queries + query_step, 16, 1024),
                             wgmma::descriptor(keys + key_step, 16, 1024), accumulate || k > 0);
  }
  wgmma::commit();
}

// Issues O += P V, P from registers (bf16 pairs in the A layout), V MN-major (one wgmma group).
__device__ __forceinline__ void issue_values(float (&o)[64], const uint32_t (&p)[8][4],
                                             uint32_t values) {
#pragma unroll
  for (int k = 0; k < kKeys / 16; ++k) {
    wgmma::mma_m64n128k16_rs_mn(
        o, p[k], wgmma::descriptor(values + uint32_t(k * 16 * kHalfRowBytes), kKeyHalfBytes, 1024));
  }
  wgmma::commit();
}

// R_K^T's bf16 high part into `high` and its low part into `low` (stage 2's keys and values), in
// the layout of a tile of 128 keys: the rotation's columns take the keys' place, S = Q R_K.
__device__ void load_rotation(const AttentionArgs& a, int kv_head, std::byte* high,
                              std::byte* low) {
  constexpr int kRowChunks = kHeadDim / 8;                    // 16-byte chunks of a row of R^T
  constexpr int kPartChunks = kHeadDim * kRowChunks;          // of one part
  constexpr int kLoads = 2 * kPartChunks / kConsumerThreads;  // all in flight before a store
  static_assert(2 * kPartChunks % kConsumerThreads == 0, "whole loads per thread");
  const uint4* source = reinterpret_cast<const uint4*>(a.query_rotation_tiles +
                                                       int64_t(kv_head) * 2 * kHeadDim * kHeadDim);
  uint4 chunks[kLoads];
#pragma unroll
  for (int k = 0; k < kLoads; ++k) chunks[k] = source[int(threadIdx.x) + k * kConsumerThreads];
#pragma unroll
  for (int k = 0; k < kLoads; ++k) {
    const int i = int(threadIdx.x) + k * kConsumerThreads;
    const int part = i / kPartChunks, n = i % kPartChunks / kRowChunks, c = i % kRowChunks;
    const uint32_t offset = uint32_t((c / 8) * kKeyHalfBytes) + wgmma::swizzled_chunk(n, c % 8);
    *reinterpret_cast<uint4*>((part == 0 ? high : low) + offset) = chunks[k];
  }
}

// The warpgroup's 64 query rows times R_K: (Q_lo R_hi + Q_hi R_lo) + Q_hi R_hi, float32
// accumulation (high and low parts hold the queries and R_K to about 2^-16), written over the
// warpgroup's queries as bf16. Each warp arrives on `rotation_done` as soon as the products are
// done: the copying thread then fills the stages that held their operands.
__device__ void rotate_queries(uint32_t queries, uint32_t low_queries, uint32_t high, uint32_t low,
                               uint32_t rotation_done, std::byte* query_tile, int warpgroup,
                               int warp, int lane) {
  float r[64];
  wgmma::fence();
  issue_scores(r, low_queries, high);
  issue_scores(r, queries, low, true);
  issue_scores(r, queries, high, true);
  wgmma::wait<0>();
  wgmma::fence_operands(r);
  __syncwarp();
  if (lane == 0) bulk::arrive(rotation_done);
  const int quad = lane % 4;
#pragma unroll
  for (int b = 0; b < 16; ++b) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = warp * 16 + lane / 4 + 8 * h, column = 8 * b + 2 * quad;
      const uint32_t offset = uint32_t((column / 64) * kQueryHalfBytes) +
                              wgmma::swizzled_chunk(row, (column % 64) / 8) +
                              uint32_t(column % 8) * 2;
      *reinterpret_cast<uint32_t*>(query_tile + offset) =
          pack_bf16x2(r[4 * b + 2 * h], r[4 * b + 2 * h + 1]);
    }
  }
  bulk::fence_proxy_async();
  if (warpgroup == 0) {
    asm volatile("bar.sync %0, 128;\n" ::"n"(kWarpgroupBarrier) : "memory");
  } else {
    asm volatile("bar.sync %0, 128;\n" ::"n"(kWarpgroupBarrier + 1) : "memory");
  }
}

// The masked scores to weights 2^(s - max) in place; the rows' running max and sum updated, and
// the factor by which their accumulated output must be rescaled returned in `correction`.
__device__ __forceinline__ void softmax_tile(float (&s)[64], const ItemBounds& bounds, Job job,
                                             const RowBounds (&rows)[2], int quad,
                                             float (&row_max)[2], float (&row_sum)[2],
                                             float (&correction)[2]) {
  if (!job_is_whole(bounds, job)) {
    // The thread's scores are keys column + 8 b + {0, 1} of each row.
    const int column = job.tile + 2 * quad;
    const RowKeys keys[2] = {row_keys(bounds, rows[0].position, rows[0].quantized_end,
                                      rows[0].band_begin, job.pages, column),
                             row_keys(bounds, rows[1].position, rows[1].quantized_end,
                                      rows[1].band_begin, job.pages, column)};
#pragma unroll
    for (int b = 0; b < 16; ++b) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if (!keys[e / 2].reads_at(8 * b + e % 2)) s[4 * b + e] = -INFINITY;
      }
    }
  }
  // The four lanes of a quad share a row.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float tile_max = -INFINITY;
#pragma unroll
    for (int b = 0; b < 16; ++b) {
      tile_max = fmaxf(tile_max, fmaxf(s[4 * b + 2 * r], s[4 * b + 2 * r + 1]));
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
    const float new_max = fmaxf(row_max[r], tile_max);
    const float base = new_max == -INFINITY ? 0.0f : new_max;  // no key of this row so far
    correction[r] = fast_exp2(row_max[r] - base);
    row_max[r] = new_max;
    float total = 0.0f;
#pragma unroll
    for (int b = 0; b < 16; ++b) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float& x = s[4 * b + 2 * r + e];
        x = fast_exp2(x - base);
        total += x;
      }
    }
    row_sum[r] = row_sum[r] * correction[r] + total;
  }
}

// Keeps the compiler from reusing the weights' registers while a wgmma may still read them.
__device__ __forceinline__ void fence_weights(uint32_t (&p)[8][4]) {
#pragma unroll
  for (int k = 0; k < 8; ++k) {
#pragma unroll
    for (int r = 0; r < 4; ++r) asm volatile("" : "+r"(p[k][r])::"memory");
  }
}

// Shared-memory addresses of a stage's tiles and barriers.
struct SharedStages {
  uint32_t base;
  __device__ uint32_t keys(int stage) const {
    return base + uint32_t(kKeysOffset + stage * kTileBytes);
  }
  __device__ uint32_t values(int stage) const {
    return base + uint32_t(kValuesOffset + stage * kTileBytes);
  }
  __device__ uint32_t barrier(int ring, int stage) const {
    return base + uint32_t(kBarriersOffset + 8 * (ring * kStages + stage));
  }
  __device__ uint32_t keys_full(int stage) const { return barrier(0, stage); }
  __device__ uint32_t values_full(int stage) const { return barrier(1, stage); }
  // Every consumer warp has read the stage's keys (values).
  __device__ uint32_t keys_empty(int stage) const { return barrier(2, stage); }
  __device__ uint32_t values_empty(int stage) const { return barrier(3, stage); }
  __device__ uint32_t rotation_done() const { return base + uint32_t(kRotationBarrierOffset); }
};

// The copying thread: each job's keys, then its values, into the next stage of their rings once
// the consumers have released it. A job's pages are looked up before the waits. While the
// consumers rotate their queries (`rotating`), stage 1's values and stage 2 hold the products'
// operands: the first tile and the second's keys are copied meanwhile, the rest after.
template <int BoxRows>
__device__ void copy_jobs(const AttentionArgs& args, const CUtensorMap* full_map,
                          const CUtensorMap* scratch_map, const BlockItem& item,
                          const ItemBounds& bounds, int kv_head, SharedStages stages,
                          bool rotating) {
  static_assert(kStages == 3, "the rotation's operands lie in stage 1's values and stage 2");
  const int value_rows = int(args.layout.num_kv_heads * args.layout.page_size_tokens);
  int stage = 0, round = 0;
  for (Job job = first_job(bounds); job.tile < bounds.key_end; job = next_job(bounds, job)) {
    const TileBoxes<BoxRows> boxes = tile_boxes<BoxRows>(args, item, bounds, kv_head, job);
    const CUtensorMap* map = job.pages == KeyPages::full ? full_map : scratch_map;
    if (round > 0) bulk::wait(stages.keys_empty(stage), uint32_t(round - 1) & 1u);
    copy_tile(map, boxes, 0, stages.keys(stage), stages.keys_full(stage));
    if (round > 0) bulk::wait(stages.values_empty(stage), uint32_t(round - 1) & 1u);
    if (rotating && round == 0 && stage == 1) bulk::wait(stages.rotation_done(), 0u);
    copy_tile(map, boxes, value_rows, stages.values(stage), stages.values_full(stage));
    if (++stage == kStages) {
      stage = 0;
      ++round;
    }
  }
}

// The rows' output, normalised by their sums (the combine kernel's division for a row of one
// record, so the result is the same to the bit), as bf16 and, when asked, as float.
__device__ void write_output(const AttentionArgs& args, const BlockItem& item, int kv_head,
                             const RowBounds (&rows)[2], int row0, int quad, const float (&o)[64],
                             float (&row_sum)[2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 1);
    row_sum[r] += __shfl_xor_sync(0xffffffffu, row_sum[r], 2);
    if (rows[r].position < 0) continue;
    const int row = row0 + 8 * r;
    const int token = row / args.group, head = row % args.group;
    const int64_t offset =
        ((int64_t(item.first_row + token) * args.num_kv_heads + kv_head) * args.group + head) *
        kHeadDim;
#pragma unroll
    for (int b = 0; b < 16; ++b) {
      const float2 value =
          make_float2(o[4 * b + 2 * r] / row_sum[r], o[4 * b + 2 * r + 1] / row_sum[r]);
      const int64_t index = offset + 8 * b + 2 * quad;
      *reinterpret_cast<__nv_bfloat162*>(args.output + index) =
          __floats2bfloat162_rn(value.x, value.y);
      if (args.output_float != nullptr)
        *reinterpret_cast<float2*>(args.output_float + index) = value;
    }
  }
}

// The weights of a tile as bf16 pairs in the A-operand layout of P V.
__device__ __forceinline__ void pack_weights(const float (&s)[64], uint32_t (&p)[8][4]) {
#pragma unroll
  for (int k = 0; k < kKeys / 16; ++k) {
#pragma unroll
    for (int r = 0; r < 4; ++r) p[k][r] = pack_bf16x2(s[8 * k + 2 * r], s[8 * k + 2 * r + 1]);
  }
}

// A consumer thread: its two query rows against every job, then their partial records.
__device__ void consume_jobs(const AttentionArgs& args, const BlockItem& item,
                             const ItemBounds& bounds, int kv_head, std::byte* shared,
                             SharedStages stages) {
  const int warpgroup = threadIdx.x / 128, warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
  const int quad = lane % 4;
  // This thread's two rows: g and g + 8 of its warp's 16.
  const int row0 = warpgroup * 64 + warp * 16 + lane / 4;
  const RowBounds rows[2] = {row_bounds(args, item, row0), row_bounds(args, item, row0 + 8)};
  const uint32_t warpgroup_rows = uint32_t(warpgroup * 2 * kQueryHalfBytes);
  const uint32_t queries = stages.base + warpgroup_rows;
  // With a rotation the queries' low parts, R_K^T's high and low parts go to stage 1's values and
  // stage 2's keys and values until the queries are rotated (copy_jobs waits for them).
  const bool rotating = args.query_rotation_tiles != nullptr;
  load_queries(args, item, kv_head, shared,
               rotating ? shared + kValuesOffset + kTileBytes : nullptr);
  if (rotating) {
    load_rotation(args, kv_head, shared + kKeysOffset + 2 * kTileBytes,
                  shared + kValuesOffset + 2 * kTileBytes);
  }
  bulk::fence_proxy_async();
  asm volatile("bar.sync 1, %0;\n" ::"n"(kConsumerThreads) : "memory");  // every consumer's queries
  if (rotating) {
    rotate_queries(queries, stages.values(1) + warpgroup_rows, stages.keys(2), stages.values(2),
                   stages.rotation_done(), shared + warpgroup_rows, warpgroup, warp, lane);
  }

  float s[64], o[64];
  uint32_t p[8][4];
#pragma unroll
  for (int i = 0; i < 64; ++i) o[i] = 0.0f;
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f}, correction[2];
  // The first job's scores alone; from then on a job's scores and the previous job's P V are
  // issued together, with no branch between the products and their waits (ptxas serializes the
  // products where it cannot see that no other instruction reads their accumulators meanwhile).
  Job job = first_job(bounds);
  if (job.tile >= bounds.key_end)
    return write_output(args, item, kv_head, rows, row0, quad, o, row_sum);
  int previous_stage = 0, previous_round = 0, stage = 0, round = 0;
  auto advance = [&] {
    previous_stage = stage;
    previous_round = round;
    if (++stage == kStages) {
      stage = 0;
      ++round;
    }
  };
  {
    const Job next = next_job(bounds, job);
    bulk::wait(stages.keys_full(stage), 0u);
    wgmma::fence();
    issue_scores(s, queries, stages.keys(stage));
    wgmma::wait<0>();
    wgmma::fence_operands(s);
    if (lane == 0) bulk::arrive(stages.keys_empty(stage));
    softmax_tile(s, bounds, job, rows, quad, row_max, row_sum, correction);
    pack_weights(s, p);
    advance();
    job = next;
  }
  while (job.tile < bounds.key_end) {
    const Job next = next_job(bounds, job);
    bulk::wait(stages.keys_full(stage), uint32_t(round) & 1u);
    bulk::wait(stages.values_full(previous_stage), uint32_t(previous_round) & 1u);
    wgmma::fence_operands(o);
    wgmma::fence();
    issue_scores(s, queries, stages.keys(stage));
    issue_values(o, p, stages.values(previous_stage));
    wgmma::wait<1>();
    wgmma::fence_operands(s);
    if (lane == 0) bulk::arrive(stages.keys_empty(stage));
    softmax_tile(s, bounds, job, rows, quad, row_max, row_sum, correction);
    // Sums of weights are never negative. A plain wait would run before the softmax, which would
    // then wait for P V instead of running under it.
    wgmma::wait_after<0>(row_sum[0]);
    wgmma::fence_operands(o);
    fence_weights(p);
    if (lane == 0) bulk::arrive(stages.values_empty(previous_stage));
    // Most tiles leave a row's max where it was: its correction is exactly 1.
    if (correction[0] != 1.0f || correction[1] != 1.0f) {
#pragma unroll
      for (int b = 0; b < 16; ++b) {
#pragma unroll
        for (int e = 0; e < 4; ++e) o[4 * b + e] *= correction[e / 2];
      }
    }
    pack_weights(s, p);
    advance();
    job = next;
  }
  bulk::wait(stages.values_full(previous_stage), uint32_t(previous_round) & 1u);
  wgmma::fence_operands(o);
  wgmma::fence();
  issue_values(o, p, stages.values(previous_stage));
  wgmma::wait<0>();
  wgmma::fence_operands(o);
  write_output(args, item, kv_head, rows, row0, quad, o, row_sum);
}

// One block: warpgroups 0 and 1 compute (64 query rows each), warpgroup 2 copies the tiles, one
// thread of it issuing the bulk copies of each job (a tile of keys in one format) into the
// three-stage rings as soon as the consumers have released a stage. Each consumer issues the
// scores of a job and the weighted values of the job before together, so that its softmax runs
// while the tensor cores compute the previous job's P V.
template <int BoxRows>
__global__ void __launch_bounds__(kThreads, 1)
    prefill_attention_kernel(const AttentionArgs args, const __grid_constant__ CUtensorMap full_map,
                             const __grid_constant__ CUtensorMap scratch_map) {
  extern __shared__ unsigned char shared_raw[];
  std::byte* shared = reinterpret_cast<std::byte*>(
      shared_raw +
      ((kSharedAlignment - (shared_address(shared_raw) % kSharedAlignment)) % kSharedAlignment));
  const SharedStages stages{shared_address(shared)};
  // Items in the plan's order, longest first (step_plan.cpp), so that no long block starts last.
  const BlockItem item = args.block_items[int(blockIdx.x) / args.num_kv_heads];
  const int kv_head = int(blockIdx.x % args.num_kv_heads);
  const QueryRow first = args.rows[item.first_row];
  const QueryRow last = args.rows[item.first_row + item.row_count - 1];
  const ItemBounds bounds{item.key_begin,
                          item.key_end,
                          int(args.sink_tokens),
                          first.position,
                          last.position,
                          first.quantized_end,
                          last.quantized_end,
                          first.band_begin,
                          last.band_begin,
                          args.layout.bits > 0 && args.scratch_pages != nullptr,
                          args.band_pages != nullptr && args.scratch_pages != nullptr};

  // The stages start as zeros (copy_tile skips boxes); each consumer warp releases a stage.
  for (int i = threadIdx.x; i < 2 * kStages * kTileBytes / 16; i += kThreads) {
    reinterpret_cast<uint4*>(shared + kKeysOffset)[i] = make_uint4(0, 0, 0, 0);
  }
  if (threadIdx.x == 0) {
    for (int stage = 0; stage < kStages; ++stage) {
      bulk::init_barrier(stages.keys_full(stage), 1);
      bulk::init_barrier(stages.values_full(stage), 1);
      bulk::init_barrier(stages.keys_empty(stage), kConsumerThreads / 32);
      bulk::init_barrier(stages.values_empty(stage), kConsumerThreads / 32);
    }
    bulk::init_barrier(stages.rotation_done(), kConsumerThreads / 32);
    bulk::fence_barrier_init();
  }
  bulk::fence_proxy_async();
  __syncthreads();

  if (threadIdx.x >= kConsumerThreads) {
    bulk::release_registers<kProducerRegisters>();
    if (threadIdx.x == kConsumerThreads) {
      copy_jobs<BoxRows>(args, &full_map, &scratch_map, item, bounds, kv_head, stages,
                         args.query_rotation_tiles != nullptr);
    }
  } else {
    bulk::claim_registers<kConsumerRegisters>();
    consume_jobs(args, item, bounds, kv_head, shared, stages);
  }
}

}  // namespace

void launch_prefill_attention(const AttentionArgs& args, int64_t block_items,
                              const CUtensorMap& full_map, const CUtensorMap& scratch_map,
                              cudaStream_t stream) {
  if (block_items == 0) return;
  const int64_t blocks = block_items * args.num_kv_heads;
  require_launch(
      blocks <= INT32_MAX && args.layout.head_dim == kHeadDim && args.group >= 1 &&
          args.group <= 8 && args.layout.page_size_tokens % kPageTensorMapRows == 0,
      "prefill attention: " + std::to_string(blocks) + " blocks, head_dim " +
          std::to_string(args.layout.head_dim) + ", " + std::to_string(args.group) +
          " query heads per KV head, pages of " + std::to_string(args.layout.page_size_tokens) +
          " tokens (supported: head_dim 128, 1-8 query heads per KV head, pages of a multiple of " +
          std::to_string(kPageTensorMapRows) + " tokens)");
  // The maps' boxes (page_tensor_map_rows) decide the instance.
  const auto kernel = page_tensor_map_rows(args.layout) == kLargePageTensorMapRows
                          ? prefill_attention_kernel<kLargePageTensorMapRows>
                          : prefill_attention_kernel<kPageTensorMapRows>;
  constexpr int kDynamicBytes = kSharedBytes + kSharedAlignment;
  allow_dynamic_shared_memory(reinterpret_cast<const void*>(kernel), kDynamicBytes,
                              "cudaFuncSetAttribute(prefill_attention)");
  kernel<<<int(blocks), kThreads, kDynamicBytes, stream>>>(args, full_map, scratch_map);
  check_launch("prefill_attention_kernel");
}

}  // namespace oscar::cuda
