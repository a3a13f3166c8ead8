#pragma once
// The work of one thread of kv_dequantize.cu: which 32 channels of which key or value row of which
// page it writes, and the codes of those channels from one aligned vector of the quantized page.
// Host and device code, so that host tests check the mapping and the unpacking against the page
// layout and code_at.
#include <cuda_runtime.h>

#include <cstdint>

namespace oscar::cuda {

inline constexpr int kDequantizeThreads = 128;
// A thread's channels: one group's parameters serve them all (groups are 32, 64 or 128 channels),
// and its 64 bytes of output make four times the bytes per chain of dependent loads (the task, the
// codes and parameters, the q8 table) that 8 channels made.
inline constexpr int kDequantizeChunkChannels = 32;

// Task (page) `task`'s keys (or values) of `kv_head` at `slot`, channels 32 * chunk to 32 * chunk
// + 31.
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

// The codes of a chunk as one vector load: its 32 codes of Bits bits take Bits 32-bit words,
// which lie on a multiple of 4 * Bits bytes within the page (page_layout.cpp: 16-byte pages, code
// regions on multiples of 32 bytes, rows of head_dim * Bits / 8 bytes).
template <int Bits>
struct ChunkCodes;
template <>
struct ChunkCodes<2> {
  using Vector = uint2;
};
template <>
struct ChunkCodes<4> {
  using Vector = uint4;
};

// Code i of a chunk from its Bits words, loaded little-endian: code_at's order (group_codec.h).
template <int Bits>
__host__ __device__ __forceinline__ int chunk_code(const uint32_t (&words)[Bits], int i) {
  return int(words[i * Bits / 32] >> (i * Bits % 32)) & ((1 << Bits) - 1);
}

}  // namespace oscar::cuda
