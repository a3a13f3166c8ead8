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

struct StepPlanShape {
  int64_t num_kv_heads = 0;
  int64_t group = 0;             // query heads per KV head
  bool fast_decode = false;      // single-token rows go to the split-K decode kernel
  int64_t resident_blocks = 1;   // attention blocks the GPU runs at once (sets the split size)
};

struct StepPlan {
  std::vector<int32_t> tokens;  // per row
  std::vector<QueryRow> rows;
  std::vector<PageIds> page_table;
  std::vector<DecodeItem> decode_items;
  std::vector<BlockItem> block_items;
  std::vector<CombineTask> combine;  // per row
  std::vector<MigrateTask> migrate;
  std::vector<KeyGroupTask> key_groups;
  std::vector<int32_t> logit_rows;
  int64_t partial_records = 0;
  int64_t decode_split_tokens = 0;  // key positions per split of a decode row
  bool decode_only = false;         // every sequence adds exactly one token

  StepCounts counts() const;
};

StepPlan make_step_plan(std::span<const SequenceStep> steps, const KvCacheConfig& kv,
                        const StepPlanShape& shape);

// Key positions per split: enough splits for about two waves of `resident_blocks` (the decode
// kernel's blocks take splits as they finish; smaller splits would pay each split's pipeline fill
// and merge more often, which costs more than it evens out at batch 1), each split a multiple of
// kDecodeSplitAlignment between 256 and 4096 positions. Each row's share of the last wave is cut
// into quarter splits, which the blocks take last (make_step_plan), to even out the launch's end.
int64_t decode_split_tokens(int64_t total_key_positions, const StepPlanShape& shape);

}  // namespace oscar::cuda
