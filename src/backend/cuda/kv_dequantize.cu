// Quantized pages into bf16 scratch pages for the tensor-core prefill kernel: x = code * scale +
// zero in float, as CpuKvStore::read_quantized, rounded to bf16 (per-token groups; KIVI stays on
// the float kernel). Each page is dequantized once per layer and step, where reading it in place
// would dequantize it again in every block of query rows that reads it. One thread per 8 channels
// (a 16-byte store) of one key or value row.
#include <cuda_bf16.h>

#include <string>
#include <type_traits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_codec.cuh"
#include "backend/cuda/prefill_attention.h"
#include "backend/cuda/warp_primitives.cuh"

namespace oscar::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kChunkChannels = 8;

// Blocks of one task (page) after another: block b of task b / blocks_per_task. Within a page a
// thread's chunk indexes [key | value][kv_head][slot][chunk]; the index arithmetic is 32-bit and
// per block where it can be (64-bit divisions by run-time sizes cost more than the dequantization).
// A chunk's 8 codes are one aligned load: Bits bytes (pages are 16-byte aligned, rows of codes
// head_dim * Bits / 8 bytes, and code regions start on multiples of 32 bytes).
template <int Bits>
__global__ void __launch_bounds__(kThreads)
    kv_dequantize_kernel(const PageLayout layout, const std::byte* quantized_pages,
                         const DequantizeTask* tasks, const float* q8_scales,
                         std::byte* scratch_pages, int blocks_per_task) {
  using Codes = std::conditional_t<Bits == 2, uint16_t, uint32_t>;
  static_assert(sizeof(Codes) * 8 == kChunkChannels * Bits, "a chunk's codes in one word");
  const int task_index = int(blockIdx.x) / blocks_per_task;
  const int within = (int(blockIdx.x) - task_index * blocks_per_task) * kThreads + int(threadIdx.x);
  const int chunks_per_row = int(layout.head_dim) / kChunkChannels;
  const int page_rows = int(layout.page_size_tokens), heads = int(layout.num_kv_heads);
  const int chunk = within % chunks_per_row;
  const int row = within / chunks_per_row;  // [key | value][kv_head][slot]
  const int slot = row % page_rows;
  const int head_row = row / page_rows;
  const int kv_head = head_row % heads;
  const bool value = head_row >= heads;
  const DequantizeTask task = tasks[task_index];
  std::byte* out =
      scratch_pages + int64_t(task.scratch) * layout.full_page_bytes +
      (value ? layout.full_value_offset(kv_head, slot) : layout.full_key_offset(kv_head, slot)) +
      chunk * kChunkChannels * 2;
  uint32_t packed[4] = {0, 0, 0, 0};
  if (slot >= task.slot_begin && slot < task.slot_end) {
    const auto* page = reinterpret_cast<const uint8_t*>(
        quantized_pages + int64_t(task.source) * layout.quantized_page_bytes);
    const uint8_t* codes =
        page + (value ? layout.value_codes(kv_head, slot) : layout.key_codes(kv_head, slot));
    const uint32_t word = reinterpret_cast<const Codes*>(codes)[chunk];
    const int group = chunk * kChunkChannels / int(layout.group_size);
    const DeviceParams params =
        load_params(page + (value ? layout.value_params(kv_head, slot, group)
                                  : layout.key_params(kv_head, slot, group)),
                    layout.param_format, q8_scales);
    float x[kChunkChannels];
#pragma unroll
    for (int i = 0; i < kChunkChannels; ++i) {
      const int code = int(word >> (i * Bits)) & ((1 << Bits) - 1);  // code_at's order
      x[i] = float(code) * params.scale + params.zero;
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) packed[i] = pack_bf16x2(x[2 * i], x[2 * i + 1]);
  }
  *reinterpret_cast<uint4*>(out) = make_uint4(packed[0], packed[1], packed[2], packed[3]);
}

}  // namespace

void launch_kv_dequantize(const PageLayout& layout, const std::byte* quantized_pages,
                          const DequantizeTask* tasks, int64_t task_count, const float* q8_scales,
                          std::byte* scratch_pages, cudaStream_t stream) {
  if (task_count == 0) return;
  const int64_t chunks_per_page =
      2 * layout.num_kv_heads * layout.page_size_tokens * layout.head_dim / kChunkChannels;
  const int64_t blocks_per_task = chunks_per_page / kThreads;
  require_launch(!layout.keys_per_channel,
                 "kv_dequantize: keys quantized per channel are read by the float kernel");
  require_launch(layout.bits == 2 || layout.bits == 4,
                 "kv_dequantize: " + std::to_string(layout.bits) + "-bit codes (supported: 2, 4)");
  require_launch(layout.head_dim % kChunkChannels == 0 && chunks_per_page % kThreads == 0 &&
                     task_count * blocks_per_task <= INT32_MAX,
                 "kv_dequantize: " + std::to_string(task_count) + " tasks of " +
                     std::to_string(chunks_per_page) + " chunks are not a launch of whole blocks");
  const auto kernel = layout.bits == 2 ? kv_dequantize_kernel<2> : kv_dequantize_kernel<4>;
  kernel<<<int(task_count * blocks_per_task), kThreads, 0, stream>>>(
      layout, quantized_pages, tasks, q8_scales, scratch_pages, int(blocks_per_task));
  check_launch("kv_dequantize_kernel");
}

}  // namespace oscar::cuda
