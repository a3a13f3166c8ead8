#pragma once
// The work of one thread of kv_dequantize.cu: which 8 channels of which key or value row of which
// page it writes, and the codes of those channels from one aligned word of the quantized page.
// Host and device code, so that host tests check the mapping and the unpacking against the page
// layout and code_at.
#include <cuda_runtime.h>

#include <cstdint>

namespace oscar::cuda {

inline constexpr int kDequantizeThreads = 256;
inline constexpr int kDequantizeChunkChannels = 8;

// Task (page) `task`'s keys (or values) of `kv_head` at `slot`, channels 8 * chunk to 8 * chunk
// + 7.
struct DequantizeChunk {
  int task, kv_head, slot, chunk;
  bool value;
};

// Thread `thread` of block `block`: a task's blocks follow each other, `blocks_per_task` of them,
// and its threads index [key | value][kv_head][slot][chunk]. All 32-bit: a 64-bit division by a
// run-time size costs more than the thread's dequantization.
__host__ __device__ __forceinline__ DequantizeChunk dequantize_chunk(int block, int thread,
                                                                     int blocks_per_task,
                                                                     int head_dim, int page_rows,
                                                                     int heads) {
  const int task = block / blocks_per_task;
  const int within = (block - task * blocks_per_task) * kDequantizeThreads + thread;
  const int chunks_per_row = head_dim / kDequantizeChunkChannels;
  const int row = within / chunks_per_row;  // [key | value][kv_head][slot]
  const int head_row = row / page_rows;
  return {task, head_row % heads, row % page_rows, within % chunks_per_row, head_row >= heads};
}

// The codes of a chunk as one word: its 8 codes of Bits bits take Bits bytes, which lie on a
// multiple of Bits within the page (page_layout.cpp: 16-byte pages, code regions on multiples of
// 32 bytes, rows of head_dim * Bits / 8 bytes).
template <int Bits>
struct ChunkCodes;
template <>
struct ChunkCodes<2> {
  using Word = uint16_t;
};
template <>
struct ChunkCodes<4> {
  using Word = uint32_t;
};

// Code i of a chunk's word, loaded little-endian: code_at's order (group_codec.h).
template <int Bits>
__host__ __device__ __forceinline__ int chunk_code(uint32_t word, int i) {
  return int(word >> (i * Bits)) & ((1 << Bits) - 1);
}

}  // namespace oscar::cuda
