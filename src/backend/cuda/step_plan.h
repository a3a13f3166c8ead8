#pragma once
// Builds one forward step's work records (step_work.h) on the host: the rows and their decode-rule
// boundaries, the page tables, the attention split (decode items for the split-K decode kernel,
// block items for the tiled prefill kernel), the tokens leaving the recent window, and the rows
// whose logits are returned. Plain C++, no CUDA: the same plan drives every layer.
#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/step_work.h"

namespace oscar::cuda {

// Query rows (token x query head of one KV head) per block of the prefill kernel.
inline constexpr int64_t kBlockQueryRows = 64;
// Alignment of the decode kernel's splits: its four warps take 64-token super-tiles in turn.
inline constexpr int64_t kDecodeSplitAlignment = 256;
// ... and of a full-precision cache's: its four warps take 16-token tiles in turn, so a split of
// 64k positions gives each warp k tiles.
inline constexpr int64_t kFullDecodeSplitAlignment = 64;
// The most waves a bf16 cache's split is fitted to before it is clamped at kLongestDecodeSplit.
inline constexpr int64_t kFullDecodeWaves = 4;
inline constexpr int64_t kLongestDecodeSplit = 4096;
// A quantized cache's splits beyond that, longest first, for launches of at least kManyWaves waves
// of them (decode_split_tokens).
inline constexpr int64_t kLongerDecodeSplits[] = {8192, 6144};
inline constexpr int64_t kManyWaves = 4;
// The longest decode row a quantized cache takes in one split where its rows are short and many
// (decode_split_tokens): the longest split and the new token, a context of 4K.
inline constexpr int64_t kWholeDecodeRow = kLongestDecodeSplit + kDecodeSplitAlignment;

struct StepPlanShape {
  int64_t num_kv_heads = 0;
  int64_t group = 0;            // query heads per KV head
  bool fast_decode = false;     // single-token rows go to the split-K decode kernel
  int64_t resident_blocks = 1;  // attention blocks the GPU runs at once (sets the split size)
  int64_t split_tokens = 0;  // > 0: this decode split instead of decode_split_tokens() (benchmarks)
  // Prefill chunks go to the tensor-core kernel (blocks of kTensorCoreBlockRows query rows reading
  // bf16 pages, the quantized ones through dequantized scratch copies) instead of the float kernel.
  bool tensor_core_prefill = false;
};

struct StepPlan {
  std::vector<int32_t> tokens;  // per row
  std::vector<QueryRow> rows;
  std::vector<PageIds> page_table;
  std::vector<DecodeItem> decode_items;
  std::vector<BlockItem> block_items;
  std::vector<CombineTask> combine;  // per row
  std::vector<MigrateTask> migrate;
  std::vector<MigrateTask> band_migrate;  // the migrated tokens that also get a band copy
  std::vector<KeyGroupTask> key_groups;
  // The tensor-core prefill kernel's page table (BlockItem::prefill_table): for each page of each
  // prefilling sequence, its full-precision page id and the scratch ids of its dequantized 2-bit
  // and band copies (-1 where no query of the step reads it in that format), and the tasks that
  // fill those scratch pages, ids 0, 1, ... over both lists.
  std::vector<PageIds> prefill_pages;
  std::vector<DequantizeTask> dequantize;
  std::vector<DequantizeTask> band_dequantize;
  std::vector<int32_t> logit_rows;
  int64_t partial_records = 0;
  int64_t decode_split_tokens = 0;  // key positions per split of a decode row
  bool decode_only = false;         // every sequence adds exactly one token
  // Every token leaving the recent window was written by an earlier step (a decode step with a
  // recent window): nothing this step writes is migrated, so all layers' migrations can run first.
  bool migrations_read_earlier_steps = true;

  StepCounts counts() const;
  int64_t max_splits() const;  // the most partial records of one row (CombineTask::count)
  int64_t scratch_pages() const { return int64_t(dequantize.size() + band_dequantize.size()); }
  void clear();  // empties every record, keeping the storage
};

// Fills `plan` (its vectors cleared, their storage kept): a backend keeps one plan for all its
// steps, because allocating a step's records afresh (a page table of 45K entries at 29 x 100K) cost
// more than the step's host work (measured:
// docs/bench/notes/2026-11-28-measurements-from-code-comments.md).
void make_step_plan(std::span<const SequenceStep> steps, const KvCacheConfig& kv,
                    const StepPlanShape& shape, StepPlan& plan);

// Key positions per split of decode rows of `decode_rows` key positions each: a split count that
// fills whole waves of `shape.resident_blocks` blocks. Smaller splits pay each split's pipeline
// fill and merge more often; larger ones leave blocks idle at the end of the launch.
// - Quantized cache: a multiple of kDecodeSplitAlignment, about one wave when the longest row still
//   gets four splits (the last wave's share cut into quarters, see make_step_plan), else two
//   waves; one split a row for rows of 4K or less when a unit per row and KV head fills half a
//   wave; 6144 or 8192 instead of 4096 only where the pieces still make four waves.
// - bf16 cache: the shortest multiple of kFullDecodeSplitAlignment that fits one wave and cuts the
//   longest row at least in two, else the same in two to four waves (kFullDecodeWaves), else about
//   two waves of at most 4096.
// The split lengths were chosen by `oscar bench decode-attention --split-tokens`; the runs are in
// docs/bench/notes/2026-11-27-decode-attention.md and
// 2026-11-28-measurements-from-code-comments.md.
int64_t decode_split_tokens(std::span<const int64_t> decode_rows, bool quantized_cache,
                            const StepPlanShape& shape);

}  // namespace oscar::cuda
