// Paged split-K decode attention. Mirrors cpu_attention (backend/cpu/cpu_attention.cpp) for a
// single query token: the query at position t reads keys [0, a) and [max(a, b), t] from bf16 pages
// and [sink, b) from quantized pages (a = min(sink, t + 1), b = quantized_end(t + 1)).
//
// Work: persistent blocks take (decode item, KV head) units in turn from a device counter; the
// block's four warps take the item's tiles round-robin (16 tokens; super-tiles of 64 (INT2) or 32
// (INT4) tokens in groups of 64 or 128, see process_packed_item), each with its own cp.async
// pipeline in shared memory, and merge their softmax states at the end into one partial record
// (attention_combine.cu merges the splits). All query heads of the GQA group are one mma operand.
//
// Per 16-token tile, as mma.m16n8k16 (tokens x channels x heads), f32 accumulation:
//   scores  S[token][head] = sum_channels K[token][c] q[head][c]    (A = keys, B = query)
//   output  O^T[c][head]  += sum_tokens V^T[c][token] P[token][head] (A = values^T, B = P^T)
// P is transposed from the scores' accumulator layout into the B layout with movmatrix.
// bf16 pages: A comes from shared memory through ldmatrix; the query and P are split into
// bf16 high + low halves (two mma each), so they keep ~16 bits like the CPU's float math.
// Quantized pages: the integer codes are the A operand, unpacked in registers into exact f16
// integers (code | 0x6400 is the f16 1024 + code), and dequantization costs one multiply-add per
// group (OSCAR "Read path"):
//   score   = sum_g s_g * (sum_{c in g} q_c code_c) + z_g * (sum_{c in g} q_c)
//   output  = sum_g sum_tokens (p s_g) code + sum_tokens p z_g
// The query (rotated by R_K already) is split into f16 high + low; P * s is one f16 operand.
// Any channel order inside a k-tile gives the same dot product, so each lane takes the codes that
// are 16 bits apart in one 32-bit word (one shift, one lop3 per pair); codes that sit 2 or 4 bits
// higher are taken unshifted as code * 4 (or * 16), the query divided by the same power of two.
// INT2 and INT4 in groups of 64 or 128 channels (the OSCAR configurations and the band) have
// their own path (process_packed_item): ldmatrix loads of the codes, no subtraction, super-tiles,
// the query one f16 operand (2^-11 relative, 8x finer than the bf16 activations it comes from).
// Other formats keep per-lane word loads (a 32-channel group would split an m-tile's rows).
//
// This file holds the work loop, the merge of a unit's states and the launch; the paths are beside
// it: decode_full_pages.cuh (bf16 pages), decode_quantized_words.cuh (word loads),
// decode_packed_codes.cuh and decode_packed_pages.cuh (super-tiles), all on
// decode_attention_warp.cuh (a warp's softmax state, pipeline, tiles, query and merge-area slice).
#include "backend/cuda/decode_attention.h"

#include "backend/cuda/chained_launch.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/decode_full_pages.cuh"
#include "backend/cuda/decode_packed_pages.cuh"
#include "backend/cuda/decode_quantized_words.cuh"

namespace oscar::cuda {
namespace decode {
namespace {

// The four warps' states of one item, merged into its partial record.
__device__ void merge_warps(const AttentionArgs& a, const DecodeItem& item, int kv_head,
                            const float* merge) {
  const int group = a.group;
  const int slice = group * (kHeadDim + 2);
  float* record = a.partials + int64_t(item.partial + kv_head) * slice;
  for (int index = threadIdx.x; index < group * kHeadDim; index += kThreads) {
    const int head = index / kHeadDim, ch = index % kHeadDim;
    float max = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) max = fmaxf(max, merge[w * slice + head]);
    float sum = 0.f, out = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float f = fast_exp2(merge[w * slice + head] - max);
      sum += merge[w * slice + group + head] * f;
      out += merge[w * slice + 2 * group + head * kHeadDim + ch] * f;
    }
    record[2 * group + head * kHeadDim + ch] = out;
    if (ch == 0) {
      record[head] = max;
      record[group + head] = sum;
    }
  }
}

// Blocks take (item, KV head) units beyond the first wave in turn from work_counter[0];
// work_counter[1] counts the blocks that are done. One pair per device: launches of this kernel
// must not overlap, which holds for the backend's single stream (and its graph), the benchmark
// and the tests.
__device__ int work_counter[2];

constexpr int kPoolsBytes = kWarps * kPoolBytes;
// The next unit's index and descriptor (written by thread 0 during the merge, read by all after
// it).
struct NextUnit {
  int work;
  DecodeItem item;
};
constexpr int kNextUnitOffset = kPoolsBytes + kQ8ScaleCount * sizeof(float);
// The pools, the q8 scale table, the next unit: all of the kernel's shared memory is dynamic, so
// that the pools start on a 128-byte line. Static shared variables shift the dynamic area by their
// size, and the 128 bytes that eight lanes copy at once then straddle two lines: the same
// instructions and bytes, longer waits for the copies.
constexpr int kSharedBytes = kNextUnitOffset + int(sizeof(NextUnit));

// Bits 0: bf16 pages only. Quantized items: INT2 and INT4 in groups of 64 or 128 channels take
// the super-tile path, groups of 32 the word-load path. Band items (INT2 caches only: the band's
// INT4 copies, f16 parameters, KvCacheConfig::band_config) take the path of the cache's groups.
template <int Bits, int Group, ParamFormat Format>
__device__ __forceinline__ void process_item(const ItemContext& c, WarpState& state,
                                             unsigned char* pool, float* merge) {
  if constexpr (Bits == 0) {
    process_full_item(c, state, pool, merge);
  } else {
    constexpr bool kSuperTiles = Group >= 64;
    if (c.item.pages == KeyPages::full) {
      process_full_item(c, state, pool, merge);
    } else if (c.item.pages == KeyPages::band) {
      if constexpr (Bits == 2 && kSuperTiles) {
        process_packed_item<4, Group, ParamFormat::f16, /*Band=*/true>(c, state, pool, merge);
      } else if constexpr (Bits == 2) {
        process_quantized_item<4, Group, ParamFormat::f16, /*Band=*/true>(c, state, pool, merge);
      }
    } else if constexpr (kSuperTiles) {
      process_packed_item<Bits, Group, Format>(c, state, pool, merge);
    } else {
      process_quantized_item<Bits, Group, Format>(c, state, pool, merge);
    }
  }
}

template <int Bits, int Group, ParamFormat Format>
__global__ void __launch_bounds__(kThreads, 3) decode_attention_kernel(const AttentionArgs args) {
  extern __shared__ __align__(128) unsigned char shared[];
  const Lane l = this_lane();
  unsigned char* pool = shared + l.warp * kPoolBytes;
  float* merge = reinterpret_cast<float*>(shared);
  float* q8_scales = reinterpret_cast<float*>(shared + kPoolsBytes);
  NextUnit& next = *reinterpret_cast<NextUnit*>(shared + kNextUnitOffset);
  if constexpr (Bits > 0 && Format == ParamFormat::q8) {
    for (int i = threadIdx.x; i < kQ8ScaleCount; i += kThreads) q8_scales[i] = args.q8_scales[i];
    __syncthreads();
  }
  // The work list is the step's plan (uploaded before the step), not an earlier kernel's output:
  // the first unit's descriptor is read before waiting for the kernel before this one, while its
  // last blocks run (it shortens the short launches).
  const int work_units = args.counts->decode_items * args.num_kv_heads;
  // The first wave takes units blockIdx.x; each later unit is claimed while the current one runs,
  // so that the atomic's round trip is hidden, and its descriptor is read while the current one's
  // warps merge: a unit's first copies wait on one round trip (its page ids), not three (the
  // descriptor, then its row, then the page ids).
  int work = blockIdx.x;
  DecodeItem item = work < work_units ? args.decode_items[work / args.num_kv_heads] : DecodeItem{};
  wait_for_producer();
  while (work < work_units) {
    int claimed = 0;
    if (threadIdx.x == 0) claimed = int(gridDim.x) + atomicAdd(&work_counter[0], 1);
    const int kv_head = work % args.num_kv_heads;
    const ItemContext context{&args, item, kv_head, q8_scales};
    WarpState state;
    state.reset();
    process_item<Bits, Group, Format>(context, state, pool, merge);
    __syncthreads();
    DecodeItem following{};
    if (threadIdx.x == 0 && claimed < work_units)
      following = args.decode_items[claimed / args.num_kv_heads];
    merge_warps(args, item, kv_head, merge);
    if (threadIdx.x == 0) {
      next.work = claimed;
      next.item = following;
    }
    __syncthreads();  // the next unit is written; the merge area is the next unit's pipeline
    work = next.work;
    item = next.item;
  }
  // Not earlier: the combine's blocks would wait beside this kernel's for its whole run, taking
  // the SMs' slots from its units.
  release_consumer();
  // The last block out resets the counters for the next launch: every other block has taken its
  // final index by then.
  if (threadIdx.x == 0 && atomicAdd(&work_counter[1], 1) == int(gridDim.x) - 1) {
    work_counter[0] = 0;
    work_counter[1] = 0;
  }
}

using KernelPointer = void (*)(AttentionArgs);

template <int Bits, int Group>
KernelPointer kernel_for_format(ParamFormat format) {
  if (format == ParamFormat::q8) return decode_attention_kernel<Bits, Group, ParamFormat::q8>;
  if (format == ParamFormat::bf16) return decode_attention_kernel<Bits, Group, ParamFormat::bf16>;
  return decode_attention_kernel<Bits, Group, ParamFormat::f16>;
}

template <int Bits>
KernelPointer kernel_for_group(const PageLayout& layout) {
  if (layout.group_size == 32) return kernel_for_format<Bits, 32>(layout.param_format);
  if (layout.group_size == 64) return kernel_for_format<Bits, 64>(layout.param_format);
  return kernel_for_format<Bits, 128>(layout.param_format);
}

KernelPointer kernel_for(const PageLayout& layout) {
  if (layout.bits == 2) return kernel_for_group<2>(layout);
  if (layout.bits == 4) return kernel_for_group<4>(layout);
  return decode_attention_kernel<0, 128, ParamFormat::f16>;
}

static_assert(kWarps * kMaxGroup * (kHeadDim + 2) * 4 <= kPoolsBytes, "merge area fits the pools");

KernelPointer prepared_kernel(const PageLayout& layout) {
  const KernelPointer kernel = kernel_for(layout);
  allow_dynamic_shared_memory(reinterpret_cast<const void*>(kernel), kSharedBytes,
                              "cudaFuncSetAttribute(decode_attention)");
  return kernel;
}

}  // namespace
}  // namespace decode

bool decode_attention_supports(const PageLayout& layout, int group) {
  const bool format_ok =
      layout.bits == 0 || ((layout.bits == 2 || layout.bits == 4) && !layout.keys_per_channel);
  return layout.head_dim == kHeadDim && group >= 1 && group <= decode::kMaxGroup &&
         layout.element_bytes == 2 && layout.page_size_tokens % decode::kTileTokens == 0 &&
         format_ok;
}

int decode_attention_resident_blocks(const PageLayout& layout) {
  const decode::KernelPointer kernel = decode::prepared_kernel(layout);
  int per_multiprocessor = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_multiprocessor, kernel, decode::kThreads,
                                                      decode::kSharedBytes),
        "cudaOccupancyMaxActiveBlocksPerMultiprocessor(decode_attention)");
  return multiprocessor_count() * per_multiprocessor;
}

void launch_decode_attention(const AttentionArgs& args, int grid_blocks, cudaStream_t stream) {
  const decode::KernelPointer kernel = decode::prepared_kernel(args.layout);
  launch_chained("decode_attention_kernel", kernel, dim3(unsigned(grid_blocks)),
                 dim3(decode::kThreads), decode::kSharedBytes, stream, args);
}

}  // namespace oscar::cuda
