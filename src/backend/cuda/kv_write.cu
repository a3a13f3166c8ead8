// The write of the new tokens' keys and values. Mirrors the key/query rotation in
// CpuBackend::attention_block (rotate_rows, backend/cpu/cpu_math.cpp: out[j] = sum_i x[i] R[i][j]
// as one fma chain over i) and CpuKvStore::write_full (backend/cpu/cpu_kv_store.cpp: bf16 rows into
// the token's slot of its full-precision page). Values are not rotated here: R_V is folded into
// W_v.
#include <algorithm>

#include "backend/cuda/chained_launch.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernel_sizes.h"
#include "backend/cuda/layer_kernels.h"
#include "backend/cuda/warp_primitives.cuh"

namespace oscar::cuda {
namespace {

constexpr int kMaxGroup = 8;
constexpr int kThreads = 128;
constexpr int kMaxRowsPerBlock = 8;
// A vector's row in shared memory, padded by 16 bytes: the 16-byte reads of one channel quad from
// the vectors a warp works on fall in different banks.
constexpr int kVectorStride = kHeadDim + 4;
constexpr int kVectorBytes = kHeadDim * 4;

// Four channels of a page row as bf16, in one 8-byte store.
__device__ __forceinline__ void store_bf16x4(std::byte* at, float4 x) {
  *reinterpret_cast<uint2*>(at) = make_uint2(pack_bf16x2(x.x, x.y), pack_bf16x2(x.z, x.w));
}

template <int Columns>
constexpr int shared_bytes(int rows_per_block, int group) {
  return kHeadDim * Columns * 4 + rows_per_block * (1 + group) * kVectorStride * 4;
}

// One block per (tile of up to 8 rows, KV head, slice of `Columns` channels): the columns of R_K
// it needs and every vector of its rows (the key, then the group's queries) are copied into shared
// memory with every copy in flight at once; then each thread takes four adjacent channels of a
// vector, each one fma chain over i as on the CPU, with a 16-byte read of R_K's row i (and one of
// the vector per four steps). Steps of up to 64 rows (decode steps) use slices of 8 channels, so
// that a step's few rows spread over 16 blocks a KV head. One thread a channel, reading the vector
// and R_K four bytes at a time, kept a decode step's blocks busy with those shared-memory reads
// (docs/bench/notes/2026-11-27-decode-step.md, the KV write in channel quads).
template <int Columns>
__global__ void __launch_bounds__(kThreads)
    kv_write_kernel(const KvWriteArgs args, int rows, int rows_per_block) {
  constexpr int kQuads = Columns / 4;  // channel quads of the slice
  extern __shared__ __align__(16) float shared[];
  float* rotation = shared;                      // [kHeadDim][Columns], used only when rotating
  float* vectors = shared + kHeadDim * Columns;  // [rows_per_block * (1 + group)][kVectorStride]
  __shared__ PageIds row_pages[kMaxRowsPerBlock];
  __shared__ int row_slots[kMaxRowsPerBlock];
  const int kv_head = blockIdx.y, first_channel = blockIdx.z * Columns, t = threadIdx.x;
  const int group = args.num_heads / args.num_kv_heads, per_row = 1 + group;
  const int first_row = blockIdx.x * rows_per_block,
            tile_rows = min(rows - first_row, rows_per_block);
  const bool rotates = args.key_rotations != nullptr;
  if (rotates) {
    const float* source =
        args.key_rotations + int64_t(kv_head) * kHeadDim * kHeadDim + first_channel;
    const uint32_t base = shared_address(rotation);
    for (int chunk = t; chunk < kHeadDim * kQuads; chunk += kThreads) {
      const int i = chunk / kQuads, quad = chunk % kQuads;
      cp_async_16(base + chunk * 16, source + i * kHeadDim + quad * 4);
    }
  }
  wait_for_producer();
  release_consumer();
  // Vector v of a row: 0 the key, 1..group the group's queries.
  const int vector_count = tile_rows * per_row;
  {
    const uint32_t base = shared_address(vectors);
    for (int chunk = t; chunk < vector_count * (kVectorBytes / 16); chunk += kThreads) {
      const int index = chunk / (kVectorBytes / 16), part = chunk % (kVectorBytes / 16);
      const int row = first_row + index / per_row, v = index % per_row;
      const int head = v == 0 ? args.num_heads + kv_head : kv_head * group + v - 1;
      cp_async_16(base + (index * kVectorStride + part * 4) * 4,
                  args.qkv + int64_t(row) * args.row_stride + int64_t(head) * kHeadDim + part * 4);
    }
    cp_async_commit();
  }
  // This thread's four value channels, if it writes some, and the tile's page slots.
  const int value_row = t / kQuads, value_quad = t % kQuads;
  float4 value{};
  if (value_row < tile_rows) {
    value = *reinterpret_cast<const float4*>(
        args.qkv + int64_t(first_row + value_row) * args.row_stride +
        int64_t(args.num_heads + args.num_kv_heads + kv_head) * kHeadDim + first_channel +
        value_quad * 4);
  }
  const PageLayout& layout = args.layout;
  if (t < tile_rows) {
    const QueryRow q = args.rows[first_row + t];
    row_pages[t] = args.page_table[q.page_table + q.position / layout.page_size_tokens];
    row_slots[t] = q.position % layout.page_size_tokens;
  }
  cp_async_wait<0>();
  __syncthreads();
  for (int item = t; item < vector_count * kQuads; item += kThreads) {
    const int index = item / kQuads, quad = item % kQuads;
    const float* x = vectors + index * kVectorStride;
    float4 out;
    if (rotates) {
      out = float4{0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll 4
      for (int i = 0; i < kHeadDim; i += 4) {
        const float4 xs = *reinterpret_cast<const float4*>(x + i);
        const float xi[4] = {xs.x, xs.y, xs.z, xs.w};
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          const float4 r =
              *reinterpret_cast<const float4*>(rotation + (i + u) * Columns + quad * 4);
          out.x = fmaf(xi[u], r.x, out.x);
          out.y = fmaf(xi[u], r.y, out.y);
          out.z = fmaf(xi[u], r.z, out.z);
          out.w = fmaf(xi[u], r.w, out.w);
        }
      }
    } else {
      out = *reinterpret_cast<const float4*>(x + first_channel + quad * 4);
    }
    const int row = index / per_row, v = index % per_row, channel = first_channel + quad * 4;
    if (v == 0) {
      std::byte* page = args.full_pages + int64_t(row_pages[row].full) * layout.full_page_bytes;
      store_bf16x4(page + layout.full_key_offset(kv_head, row_slots[row]) + channel * 2, out);
    } else {
      *reinterpret_cast<float4*>(
          args.rotated_queries +
          (int64_t(first_row + row) * args.num_heads + kv_head * group + v - 1) * kHeadDim +
          channel) = out;
    }
  }
  if (value_row < tile_rows) {
    std::byte* page = args.full_pages + int64_t(row_pages[value_row].full) * layout.full_page_bytes;
    store_bf16x4(page + layout.full_value_offset(kv_head, row_slots[value_row]) +
                     (first_channel + value_quad * 4) * 2,
                 value);
  }
}

template <int Columns>
void launch_slices(const KvWriteArgs& args, int64_t rows, cudaStream_t stream) {
  constexpr int kMaxShared = shared_bytes<Columns>(kMaxRowsPerBlock, kMaxGroup);
  allow_dynamic_shared_memory(reinterpret_cast<const void*>(kv_write_kernel<Columns>), kMaxShared,
                              "cudaFuncSetAttribute(kv_write_kernel)");
  const int rows_per_block = int(std::min<int64_t>(rows, kMaxRowsPerBlock));
  const dim3 grid(unsigned((rows + rows_per_block - 1) / rows_per_block),
                  unsigned(args.num_kv_heads), kHeadDim / Columns);
  const int shared = shared_bytes<Columns>(rows_per_block, args.num_heads / args.num_kv_heads);
  launch_chained("kv_write_kernel", kv_write_kernel<Columns>, grid, dim3(kThreads), size_t(shared),
                 stream, args, int(rows), rows_per_block);
}

// Prefill chunks' rows without a rotation: a copy, a thread per four channels of a row's query
// (into `rotated_queries` as they are, when asked), key or value (into its page slot as bf16), the
// threads of a warp on consecutive channels. (Staged through shared memory per slice of channels,
// as the kernel above does for a decode step's few rows, the copy ran at a third of the memory's
// speed.)
constexpr int kCopyThreads = 256;

__global__ void __launch_bounds__(kCopyThreads)
    kv_write_copy_kernel(const KvWriteArgs args, int rows) {
  wait_for_producer();
  release_consumer();
  constexpr int kQuads = kHeadDim / 4;
  // The q (when written), k and v heads of a row.
  const int first_vector = args.write_queries ? 0 : args.num_heads;
  const int vectors = args.num_heads + 2 * args.num_kv_heads - first_vector;
  const int64_t items = int64_t(rows) * vectors * kQuads;
  const PageLayout& layout = args.layout;
  for (int64_t item = int64_t(blockIdx.x) * kCopyThreads + threadIdx.x; item < items;
       item += int64_t(gridDim.x) * kCopyThreads) {
    const int quad = int(item % kQuads), vector = first_vector + int(item / kQuads % vectors);
    const int row = int(item / (int64_t(kQuads) * vectors));
    const float4 x = reinterpret_cast<const float4*>(args.qkv + int64_t(row) * args.row_stride +
                                                     int64_t(vector) * kHeadDim)[quad];
    if (vector < args.num_heads) {
      reinterpret_cast<float4*>(args.rotated_queries +
                                (int64_t(row) * args.num_heads + vector) * kHeadDim)[quad] = x;
      continue;
    }
    const bool is_value = vector >= args.num_heads + args.num_kv_heads;
    const int kv_head = vector - args.num_heads - (is_value ? args.num_kv_heads : 0);
    const QueryRow q = args.rows[row];
    const PageIds page = args.page_table[q.page_table + q.position / layout.page_size_tokens];
    const int slot = q.position % layout.page_size_tokens;
    store_bf16x4(args.full_pages + int64_t(page.full) * layout.full_page_bytes +
                     (is_value ? layout.full_value_offset(kv_head, slot)
                               : layout.full_key_offset(kv_head, slot)) +
                     quad * 8,
                 x);
  }
}

void launch_copy(const KvWriteArgs& args, int64_t rows, cudaStream_t stream) {
  const int64_t items =
      rows * ((args.write_queries ? args.num_heads : 0) + 2 * args.num_kv_heads) * (kHeadDim / 4);
  const int64_t blocks = std::min<int64_t>((items + kCopyThreads - 1) / kCopyThreads, 65536);
  launch_chained("kv_write_copy_kernel", kv_write_copy_kernel, dim3(unsigned(blocks)),
                 dim3(kCopyThreads), 0, stream, args, int(rows));
}

// Prefill chunks' rows with a rotation: the key and (when asked) the group's queries of each row
// are the rows of X [vectors][D], and X R_K a matrix product, tiled in registers: a thread takes 8
// vectors x 8 channels of a 128-vector tile, each output one fma chain over i as on the CPU (the
// same results as the kernel above, with a quarter of its shared-memory reads per fma). The blocks
// of a KV head stay resident: each copies the head's R_K into shared memory once, then walks its
// share of the head's tiles with the next tile's copy in flight while it computes the current one
// (one tile per block, copied and then computed, left the multiprocessors waiting on every copy).
// Each block also copies its share of the rows' values.
constexpr int kTileVectors = 128;
constexpr int kTileThreads = 256;
constexpr int kTileVectorStride = kHeadDim + 4;  // floats
constexpr int kTileFloats = kTileVectors * kTileVectorStride;
constexpr int kTileSharedBytes = (kHeadDim * kHeadDim + 2 * kTileFloats) * 4;

// Starts the copies of tile `tile`'s vectors into `target` (vectors past the end repeat the last
// one: computed, never stored).
__device__ __forceinline__ void copy_vector_tile(const KvWriteArgs& args, int kv_head, int tile,
                                                 int vectors, int per_row, float* target) {
  const int group = args.num_heads / args.num_kv_heads;
  for (int chunk = int(threadIdx.x); chunk < kTileVectors * (kHeadDim / 4); chunk += kTileThreads) {
    const int local = chunk / (kHeadDim / 4), quad = chunk % (kHeadDim / 4);
    const int v = min(tile * kTileVectors + local, vectors - 1);
    const int row = v / per_row, which = v % per_row;
    const int head = which == 0 ? args.num_heads + kv_head : kv_head * group + which - 1;
    cp_async_16(shared_address(target + local * kTileVectorStride + quad * 4),
                args.qkv + int64_t(row) * args.row_stride + int64_t(head) * kHeadDim + quad * 4);
  }
  cp_async_commit();
}

__global__ void __launch_bounds__(kTileThreads)
    kv_write_rotated_tile_kernel(const KvWriteArgs args, int rows) {
  extern __shared__ __align__(16) float shared[];
  float* rotation = shared;                     // [D][D]
  float* tiles = shared + kHeadDim * kHeadDim;  // two [kTileVectors][kTileVectorStride]
  const int kv_head = blockIdx.y, t = threadIdx.x;
  const int group = args.num_heads / args.num_kv_heads;
  const int per_row = args.write_queries ? 1 + group : 1;  // the key, then the queries
  const int vectors = rows * per_row, tile_count = (vectors + kTileVectors - 1) / kTileVectors;
  const float* source = args.key_rotations + int64_t(kv_head) * kHeadDim * kHeadDim;
  for (int chunk = t; chunk < kHeadDim * kHeadDim / 4; chunk += kTileThreads) {
    cp_async_16(shared_address(rotation) + chunk * 16, source + chunk * 4);
  }
  wait_for_producer();
  release_consumer();
  const PageLayout& layout = args.layout;
  // Lanes 0-15 of a half warp take channels 4q..4q+3 and 64+4q..64+4q+3: each 16-byte read of a
  // row of R_K by the half warp is 256 contiguous bytes, with no two lanes in one bank.
  const int quad = t % 16, first_local = (t / 16) * 8;  // vectors first_local..first_local+7
  int tile = int(blockIdx.x);
  if (tile < tile_count) copy_vector_tile(args, kv_head, tile, vectors, per_row, tiles);
  for (int n = 0; tile < tile_count; tile += int(gridDim.x), ++n) {
    const float* x_tile = tiles + (n % 2) * kTileFloats;
    const int next = tile + int(gridDim.x);
    if (next < tile_count) {
      copy_vector_tile(args, kv_head, next, vectors, per_row, tiles + ((n + 1) % 2) * kTileFloats);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    float out[8][8] = {};
#pragma unroll 1
    for (int i = 0; i < kHeadDim; i += 4) {
      float4 x[8];
#pragma unroll
      for (int a = 0; a < 8; ++a) {
        x[a] = *reinterpret_cast<const float4*>(x_tile + (first_local + a) * kTileVectorStride + i);
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const float* r_row = rotation + (i + u) * kHeadDim + 4 * quad;
        const float4 ra = *reinterpret_cast<const float4*>(r_row);
        const float4 rb = *reinterpret_cast<const float4*>(r_row + 64);
        const float r[8] = {ra.x, ra.y, ra.z, ra.w, rb.x, rb.y, rb.z, rb.w};
#pragma unroll
        for (int a = 0; a < 8; ++a) {
          const float xi = u == 0 ? x[a].x : u == 1 ? x[a].y : u == 2 ? x[a].z : x[a].w;
#pragma unroll
          for (int b = 0; b < 8; ++b) out[a][b] = fmaf(xi, r[b], out[a][b]);
        }
      }
    }
    const int channel = 4 * quad;
#pragma unroll
    for (int a = 0; a < 8; ++a) {
      const int v = tile * kTileVectors + first_local + a;
      if (v >= vectors) break;
      const int row = v / per_row, which = v % per_row;
      const float4 low{out[a][0], out[a][1], out[a][2], out[a][3]};
      const float4 high{out[a][4], out[a][5], out[a][6], out[a][7]};
      if (which == 0) {
        const QueryRow q = args.rows[row];
        const PageIds page = args.page_table[q.page_table + q.position / layout.page_size_tokens];
        std::byte* at = args.full_pages + int64_t(page.full) * layout.full_page_bytes +
                        layout.full_key_offset(kv_head, q.position % layout.page_size_tokens) +
                        channel * 2;
        store_bf16x4(at, low);
        store_bf16x4(at + 64 * 2, high);
      } else {
        float* at = args.rotated_queries +
                    (int64_t(row) * args.num_heads + kv_head * group + which - 1) * kHeadDim +
                    channel;
        *reinterpret_cast<float4*>(at) = low;
        *reinterpret_cast<float4*>(at + 64) = high;
      }
    }
    __syncthreads();  // every thread is done with this buffer before the next copy into it
  }
  // The values of this block's share of the rows (not rotated: R_V is folded into W_v).
  const int rows_per_block = (rows + int(gridDim.x) - 1) / int(gridDim.x);
  const int first_row = int(blockIdx.x) * rows_per_block;
  const int last_row = min(rows, first_row + rows_per_block);
  for (int item = t; item < (last_row - first_row) * (kHeadDim / 4); item += kTileThreads) {
    const int row = first_row + item / (kHeadDim / 4), quad4 = item % (kHeadDim / 4);
    const float4 value = reinterpret_cast<const float4*>(
        args.qkv + int64_t(row) * args.row_stride +
        int64_t(args.num_heads + args.num_kv_heads + kv_head) * kHeadDim)[quad4];
    const QueryRow q = args.rows[row];
    const PageIds page = args.page_table[q.page_table + q.position / layout.page_size_tokens];
    store_bf16x4(args.full_pages + int64_t(page.full) * layout.full_page_bytes +
                     layout.full_value_offset(kv_head, q.position % layout.page_size_tokens) +
                     quad4 * 8,
                 value);
  }
}

// Blocks a KV head: together about one per multiprocessor (each holds a multiprocessor's shared
// memory), and no more than the head has tiles.
void launch_rotated_tiles(const KvWriteArgs& args, int64_t rows, cudaStream_t stream) {
  allow_dynamic_shared_memory(reinterpret_cast<const void*>(kv_write_rotated_tile_kernel),
                              kTileSharedBytes,
                              "cudaFuncSetAttribute(kv_write_rotated_tile_kernel)");
  const int64_t vectors = rows * (args.write_queries ? 1 + args.num_heads / args.num_kv_heads : 1);
  const int64_t tiles = (vectors + kTileVectors - 1) / kTileVectors;
  const int64_t per_head =
      std::clamp<int64_t>(multiprocessor_count() / args.num_kv_heads, 1, tiles);
  const dim3 grid(unsigned(per_head), unsigned(args.num_kv_heads));
  launch_chained("kv_write_rotated_tile_kernel", kv_write_rotated_tile_kernel, grid,
                 dim3(kTileThreads), size_t(kTileSharedBytes), stream, args, int(rows));
}

}  // namespace

void launch_kv_write(const KvWriteArgs& args, int64_t rows, cudaStream_t stream) {
  if (rows == 0) return;
  if (rows <= 64) {
    launch_slices<8>(args, rows, stream);
  } else if (args.key_rotations != nullptr) {
    launch_rotated_tiles(args, rows, stream);
  } else {
    launch_copy(args, rows, stream);
  }
}

}  // namespace oscar::cuda
