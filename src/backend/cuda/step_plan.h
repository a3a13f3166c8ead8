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
  int64_t group = 0;             // query heads per KV head
  bool fast_decode = false;      // single-token rows go to the split-K decode kernel
  int64_t resident_blocks = 1;   // attention blocks the GPU runs at once (sets the split size)
  int64_t split_tokens = 0;      // > 0: this decode split instead of decode_split_tokens() (benchmarks)
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
  void clear();                // empties every record, keeping the storage
};

// Fills `plan` (its vectors cleared, their storage kept): a backend keeps one plan for all its steps,
// because a step allocating its records afresh paid for the fresh memory every time (29 sequences
// of 100K: a page table of 45K entries, 544 KB, 4 ms a step on a 2-core development machine
// against 0.2 ms into storage kept from the step before).
void make_step_plan(std::span<const SequenceStep> steps, const KvCacheConfig& kv, const StepPlanShape& shape,
                    StepPlan& plan);

// Key positions per split of decode rows of `decode_rows` key positions each, between 256 and 4096,
// or up to 4352 (a whole row of 4K), 6144 or 8192 for a quantized cache. A quantized cache: a
// multiple of kDecodeSplitAlignment, about one wave of `resident_blocks` splits when its longest
// row still gets four splits (each row's share of the last wave is then cut into quarter splits,
// which the blocks take last, see make_step_plan), else about two waves, or one split a row where
// the rows are 4K or shorter and a unit per row and KV head fills half a wave. Where one wave would
// need splits longer than 4096, the longest of 8192 and 6144 whose pieces still make four waves,
// else 4096: INT2 with the band, 4096 -> 8192, H100 / H200 (docs/bench section (a)): 128K x 64 1742
// -> 1694 / 1736 -> 1677 us, 64K x 32 462 -> 454 / 426 -> 410, 100K x 16 347 -> 343 / 318 -> 311;
// with fewer waves the longer splits' tail costs more than they save (32K x 8 75 -> 105 us at 8192
// on the H100, 64K x 8 129 -> 152 at 6144, 100K x 8 186 -> 199 at 8192). A bf16 cache: the shortest
// multiple of kFullDecodeSplitAlignment whose pieces, counted row by row, fit one wave and cut the
// longest row into two splits or more, else the same in two, three or four waves
// (kFullDecodeWaves), else about two waves of 4096 at most. Measured on the H100 (oscar bench
// decode-attention --split-tokens, docs/bench): INT2 32K x 1 took 25.1 us at 768 vs 30.0 at 512,
// 32K x 8 82.1 us at 4096 vs 91.7 at 2816; but 8K x 32 117 us at 4096 vs 98 at 2816, and bf16
// splits one wave long were 12% slower at 32K x 8 (447 us vs 400, the wave clamped to 4096). bf16
// below the clamp, at `2e505d2`: 32K x 1 57.1 us at one wave (768) vs 62.0 at two, 4K x 16 101.5 vs
// 106.4, 8K x 16 188.9 vs 197.2, 16K x 8 188.5 vs 194.8, 128K x 1 189.2 vs 199.4; but 4K x 32,
// whose rows one wave cuts into 2816 + 1281, 204.1 vs 195.7 at 1536. Smaller splits pay each
// split's pipeline fill and merge more often, larger ones leave blocks idle at the end. Multiples
// of 256 rounded a bf16 wave's longest piece up by as much as three tiles per warp (32K x 1: 768,
// twelve tiles, where 704 gives eleven in one wave); multiples of 64 were 0.5-1% faster where they
// differ (4K x 32 195.3 -> 193.2 us, 128K x 1 189.6 -> 187.6), not the 8% the tiles suggest: the
// wave shares the memory bandwidth. Three and four waves, where one or two fit no split (before,
// such shapes took two waves' worth, clamped at 4096, e.g. 4096 + 4096 + 1 positions a row at 8K x
// 64): one H100, three runs each, µs, the split fitted to three or four waves against the old one:
// 4K x 64 368.0 (1408) vs 375.7 (2816), 8K x 64 716.1 (2752) vs 738.6 (4096), 16K x 32 715.3 (2752)
// vs 737.6, 32K x 16 707.7 (3648) vs 730.0, 64K x 8 704.0 (3648) vs 726.2, 128K x 4 699.1 (3584) vs
// 727.2; of the other splits tried only 2112 at 4K x 64 was faster (366.7; it leaves the row no two
// whole splits). On a second H100 the six were 0.3-1.8% faster, the other shapes within 1%
// (docs/bench section (a)). Beyond four waves the clamp stays: not measured.
int64_t decode_split_tokens(std::span<const int64_t> decode_rows, bool quantized_cache, const StepPlanShape& shape);

}  // namespace oscar::cuda
