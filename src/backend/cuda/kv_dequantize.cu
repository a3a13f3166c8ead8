// Quantized pages into bf16 scratch pages for the tensor-core prefill kernel: x = code * scale +
// zero in float, as CpuKvStore::read_quantized, rounded to bf16 (per-token groups; KIVI stays on
// the float kernel). Each page is dequantized once per layer and step, where reading it in place
// would dequantize it again in every block of query rows that reads it. One thread per 32 channels
// (four 16-byte stores) of one key or value row.
#include <cuda_bf16.h>

#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/dequantize_chunks.h"
#include "backend/cuda/device_codec.cuh"
#include "backend/cuda/prefill_attention.h"
#include "backend/cuda/warp_primitives.cuh"

namespace oscar::cuda {
namespace {

// Blocks of one task (page) after another (dequantize_chunks.h), each thread 32 channels of a row.
template <int Bits>
__global__ void __launch_bounds__(kDequantizeThreads)
    kv_dequantize_kernel(const PageLayout layout, const std::byte* quantized_pages,
                         const DequantizeTask* tasks, const float* q8_scales,
                         std::byte* scratch_pages, int blocks_per_task) {
  const DequantizeChunk c =
      dequantize_chunk(int(blockIdx.x), int(threadIdx.x), blocks_per_task, int(layout.head_dim),
                       int(layout.page_size_tokens), int(layout.num_kv_heads));
  const DequantizeTask task = tasks[c.task];
  std::byte* out = scratch_pages + int64_t(task.scratch) * layout.full_page_bytes +
                   (c.value ? layout.full_value_offset(c.kv_head, c.slot)
                            : layout.full_key_offset(c.kv_head, c.slot)) +
                   c.chunk * kDequantizeChunkChannels * 2;
  constexpr int kPairs = kDequantizeChunkChannels / 2;
  uint32_t packed[kPairs] = {};
  if (c.slot >= task.slot_begin && c.slot < task.slot_end) {
    const auto* page = reinterpret_cast<const uint8_t*>(
        quantized_pages + int64_t(task.source) * layout.quantized_page_bytes);
    const uint8_t* codes = page + (c.value ? layout.value_codes(c.kv_head, c.slot)
                                           : layout.key_codes(c.kv_head, c.slot));
    using Vector = typename ChunkCodes<Bits>::Vector;
    const Vector vector = reinterpret_cast<const Vector*>(codes)[c.chunk];
    uint32_t words[Bits];
    memcpy(words, &vector, sizeof(vector));
    const int group = c.chunk * kDequantizeChunkChannels / int(layout.group_size);
    const DeviceParams params =
        load_params(page + (c.value ? layout.value_params(c.kv_head, c.slot, group)
                                    : layout.key_params(c.kv_head, c.slot, group)),
                    layout.param_format, q8_scales);
#pragma unroll
    for (int i = 0; i < kPairs; ++i) {
      packed[i] =
          pack_bf16x2(float(chunk_code<Bits>(words, 2 * i)) * params.scale + params.zero,
                      float(chunk_code<Bits>(words, 2 * i + 1)) * params.scale + params.zero);
    }
  }
#pragma unroll
  for (int i = 0; i < kPairs / 4; ++i) {
    reinterpret_cast<uint4*>(out)[i] =
        make_uint4(packed[4 * i], packed[4 * i + 1], packed[4 * i + 2], packed[4 * i + 3]);
  }
}

}  // namespace

void launch_kv_dequantize(const PageLayout& layout, const std::byte* quantized_pages,
                          const DequantizeTask* tasks, int64_t task_count, const float* q8_scales,
                          std::byte* scratch_pages, cudaStream_t stream) {
  if (task_count == 0) return;
  const int64_t chunks_per_page = 2 * layout.num_kv_heads * layout.page_size_tokens *
                                  layout.head_dim / kDequantizeChunkChannels;
  const int64_t blocks_per_task = chunks_per_page / kDequantizeThreads;
  require_launch(!layout.keys_per_channel,
                 "kv_dequantize: keys quantized per channel are read by the float kernel");
  require_launch(layout.bits == 2 || layout.bits == 4,
                 "kv_dequantize: " + std::to_string(layout.bits) + "-bit codes (supported: 2, 4)");
  require_launch(layout.group_size % kDequantizeChunkChannels == 0 &&
                     layout.head_dim % kDequantizeChunkChannels == 0 &&
                     chunks_per_page % kDequantizeThreads == 0 &&
                     task_count * blocks_per_task <= INT32_MAX,
                 "kv_dequantize: " + std::to_string(task_count) + " tasks of " +
                     std::to_string(chunks_per_page) + " chunks of " +
                     std::to_string(kDequantizeChunkChannels) + " channels, groups of " +
                     std::to_string(layout.group_size) +
                     ": not a launch of whole blocks, or a chunk would span two groups");
  const auto kernel = layout.bits == 2 ? kv_dequantize_kernel<2> : kv_dequantize_kernel<4>;
  kernel<<<int(task_count * blocks_per_task), kDequantizeThreads, 0, stream>>>(
      layout, quantized_pages, tasks, q8_scales, scratch_pages, int(blocks_per_task));
  check_launch("kv_dequantize_kernel");
}

}  // namespace oscar::cuda
