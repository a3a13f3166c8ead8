// The dequantization kernel's thread mapping and code unpacking (backend/cuda/dequantize_chunks.h),
// checked on the host against the page layout and group_codec's code_at. No GPU needed.
#include <gtest/gtest.h>

#ifdef OSCAR_HAVE_CUDA

#include <cstring>
#include <random>
#include <vector>

#include "backend/cuda/dequantize_chunks.h"
#include "kvcache/page_layout.h"
#include "quant/group_codec.h"

namespace oscar::cuda {
namespace {

KvCacheConfig quantized_config(KvDtype dtype, int page, int group, ParamFormat format) {
  KvCacheConfig c;
  c.dtype = dtype;
  c.method = KvMethod::naive;  // the layout is the same for every per-token method
  c.page_size_tokens = page;
  c.group_size = group;
  c.param_format = format;
  return c;
}

// Every thread of a launch of `tasks` pages writes one chunk (64 bytes) of a scratch page, and
// together they write each byte of each task's page once.
TEST(DequantizeChunks, ThreadsWriteEveryByteOfEveryScratchPageOnce) {
  for (const int page : {16, 48, 64}) {
    for (const int heads : {1, 2, 8}) {
      const PageLayout layout =
          make_page_layout(quantized_config(KvDtype::int2, page, 128, ParamFormat::q8), heads, 128);
      const int64_t chunks_per_page = 2 * heads * page * 128 / kDequantizeChunkChannels;
      ASSERT_EQ(chunks_per_page % kDequantizeThreads, 0);
      const int blocks_per_task = int(chunks_per_page / kDequantizeThreads);
      constexpr int kTasks = 3;
      std::vector<int> writes(size_t(kTasks * layout.full_page_bytes), 0);
      for (int block = 0; block < kTasks * blocks_per_task; ++block) {
        for (int thread = 0; thread < kDequantizeThreads; ++thread) {
          const DequantizeChunk c =
              dequantize_chunk(block, thread, blocks_per_task, 128, page, heads);
          ASSERT_TRUE(c.task >= 0 && c.task < kTasks && c.kv_head >= 0 && c.kv_head < heads &&
                      c.slot >= 0 && c.slot < page && c.chunk >= 0 &&
                      c.chunk < 128 / kDequantizeChunkChannels)
              << "block " << block << " thread " << thread;
          const int64_t offset = c.task * layout.full_page_bytes +
                                 (c.value ? layout.full_value_offset(c.kv_head, c.slot)
                                          : layout.full_key_offset(c.kv_head, c.slot)) +
                                 c.chunk * kDequantizeChunkChannels * 2;
          for (int b = 0; b < kDequantizeChunkChannels * 2; ++b) ++writes[size_t(offset + b)];
        }
      }
      for (size_t b = 0; b < writes.size(); ++b) {
        ASSERT_EQ(writes[b], 1) << "byte " << b << ", pages of " << page << ", " << heads
                                << " heads";
      }
    }
  }
}

template <int Bits>
void expect_chunk_codes_match_code_at(const PageLayout& layout, std::mt19937& rng) {
  std::vector<uint8_t> bytes(size_t(layout.quantized_page_bytes));
  for (uint8_t& b : bytes) b = uint8_t(rng());
  for (int head = 0; head < layout.num_kv_heads; ++head) {
    for (int slot = 0; slot < layout.page_size_tokens; ++slot) {
      for (const int64_t row : {layout.key_codes(head, slot), layout.value_codes(head, slot)}) {
        for (int chunk = 0; chunk < layout.head_dim / kDequantizeChunkChannels; ++chunk) {
          // The kernel applies one group's parameters to the whole chunk.
          const int first = chunk * kDequantizeChunkChannels;
          ASSERT_EQ(first / layout.group_size,
                    (first + kDequantizeChunkChannels - 1) / layout.group_size);
          using Vector = typename ChunkCodes<Bits>::Vector;
          const int64_t offset = row + chunk * int64_t(sizeof(Vector));
          // The kernel loads the vector in one access: it must lie on a multiple of its size.
          ASSERT_EQ(offset % int64_t(sizeof(Vector)), 0) << "head " << head << " slot " << slot;
          static_assert(sizeof(Vector) == Bits * sizeof(uint32_t), "Bits words a chunk");
          uint32_t words[Bits];
          std::memcpy(words, bytes.data() + offset, sizeof(Vector));
          for (int i = 0; i < kDequantizeChunkChannels; ++i) {
            ASSERT_EQ(chunk_code<Bits>(words, i),
                      int(code_at(bytes.data() + row, chunk * kDequantizeChunkChannels + i, Bits)))
                << "chunk " << chunk << " code " << i;
          }
        }
      }
    }
  }
}

// A chunk's codes read as one vector unpack to code_at's codes, and the vector is aligned, for the
// 2-bit pages and the 4-bit band and INT4 pages of every group size, parameter format and page
// size.
TEST(DequantizeChunks, VectorCodesMatchCodeAtAndAreAligned) {
  std::mt19937 rng(7);
  for (const int page : {16, 48, 64}) {
    for (const int group : {32, 64, 128}) {
      for (const ParamFormat format :
           {ParamFormat::f16, ParamFormat::bf16, ParamFormat::q8, ParamFormat::f32}) {
        for (const int heads : {1, 8}) {
          SCOPED_TRACE(testing::Message()
                       << "pages of " << page << ", groups of " << group << ", format "
                       << int(format) << ", " << heads << " heads");
          expect_chunk_codes_match_code_at<2>(
              make_page_layout(quantized_config(KvDtype::int2, page, group, format), heads, 128),
              rng);
          expect_chunk_codes_match_code_at<4>(
              make_page_layout(quantized_config(KvDtype::int4, page, group, format), heads, 128),
              rng);
        }
      }
    }
  }
}

}  // namespace
}  // namespace oscar::cuda

#endif  // OSCAR_HAVE_CUDA
