#pragma once
// The work records of one forward step, as the kernels read them: plain 32-bit fields, built on
// the host by step_plan.cpp from the engine's page tables and the decode rule
// (kvcache/kv_cache_config.h), uploaded once per step and read by every layer.
#include <cstdint>

namespace oscar::cuda {

// Query rows (tokens x the query heads of one KV head) of a block item for the tensor-core prefill
// kernel: two warpgroups of 64.
inline constexpr int64_t kTensorCoreBlockRows = 128;

// One new token of one sequence (a row of the step's activations).
struct QueryRow {
  int32_t position;       // t
  int32_t page_table;     // index of the sequence's logical page 0 in the step's page table
  int32_t quantized_end;  // quantized_end(t + 1): keys [sink, quantized_end) are read quantized
  // band_begin(t + 1): of those, keys [band_begin, quantized_end) are read from their 4-bit band
  // copies (band_begin == quantized_end without a band).
  int32_t band_begin;
};

// The step's page tables, concatenated: LogicalPage {full, quantized, band} of sequence_pages.h.
struct PageIds {
  int32_t full;
  int32_t quantized;
  int32_t band;
};

// Which pages a run of keys is read from.
enum class KeyPages : int32_t { full, quantized, band };

// A decode query's keys [begin, end), all read from one kind of page, for every KV head: partial
// record `partial + kv_head` receives (max, sum, unnormalised output). `page_table` repeats the
// row's (QueryRow::page_table), so that the kernel starts an item's page lookups without first
// reading its row.
struct DecodeItem {
  int32_t row;
  KeyPages pages;
  int32_t begin;
  int32_t end;
  int32_t partial;
  int32_t page_table;
};

// Consecutive rows of one sequence (a block of a prefill chunk, or one decode row split over
// key ranges) and the key positions [key_begin, key_end) they read under the decode rule. Token j
// of the block, KV head h writes partial record `partial + j * num_kv_heads + h`. The tensor-core
// prefill kernel finds the sequence's bf16 pages at `prefill_table` of the step's prefill page
// table (-1 for the float kernel's items) and writes its rows' output itself (`partial` -1).
struct BlockItem {
  int32_t first_row;
  int32_t row_count;
  int32_t key_begin;
  int32_t key_end;
  int32_t partial;
  int32_t prefill_table;
};

// A quantized page of a prefilling sequence (2-bit, or its band copy) dequantized into a bf16
// scratch page laid out as a full-precision page, for the tensor-core prefill kernel: slots
// [slot_begin, slot_end), the keys some query of the step reads from that page; the other slots
// are written as zeros.
struct DequantizeTask {
  int32_t source;   // page id in the quantized (or band) arena
  int32_t scratch;  // page id in the scratch arena
  int32_t slot_begin;
  int32_t slot_end;
};

// The partial records of one row: `first + kv_head`, `first + kv_head + stride`, ... (`count`).
struct CombineTask {
  int32_t first;
  int32_t count;
  int32_t stride;
};

// One token leaving the recent window: quantized from its full-precision page (per-token groups;
// for KIVI only its values), or, in the band's list, copied at 4 bits into its band page.
struct MigrateTask {
  int32_t position;
  int32_t page_table;
};

// KIVI keys: positions [first, first + count) of one position-aligned group, quantized per channel.
struct KeyGroupTask {
  int32_t first;
  int32_t count;
  int32_t page_table;
};

// Counts the persistent kernels read on the device (the grid of a captured graph is fixed).
struct StepCounts {
  int32_t decode_items;
  int32_t block_items;
  int32_t migrate_tasks;
  int32_t key_group_tasks;
  int32_t band_migrate_tasks;
};

}  // namespace oscar::cuda
