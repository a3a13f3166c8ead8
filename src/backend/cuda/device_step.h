#pragma once
// A step plan (step_plan.h) in device memory: one array per kind of record, grown geometrically and
// never shrunk, filled through one pinned staging buffer with one asynchronous copy per array.
// Addresses stay fixed between steps unless an array grows, so a captured graph stays valid.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/attention_args.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/step_plan.h"

namespace oscar::cuda {

class DeviceStep {
 public:
  // Returns true when an array moved (graphs captured before must be dropped).
  bool upload(const StepPlan& plan, cudaStream_t stream);

  const int32_t* tokens() const { return tokens_.data(); }
  const QueryRow* rows() const { return rows_.data(); }
  const PageIds* page_table() const { return page_table_.data(); }
  const DecodeItem* decode_items() const { return decode_items_.data(); }
  const BlockItem* block_items() const { return block_items_.data(); }
  const CombineTask* combine() const { return combine_.data(); }
  const MigrateTask* migrate() const { return migrate_.data(); }
  const MigrateTask* band_migrate() const { return band_migrate_.data(); }
  const KeyGroupTask* key_groups() const { return key_groups_.data(); }
  const PageIds* prefill_pages() const { return prefill_pages_.data(); }
  const DequantizeTask* dequantize() const { return dequantize_.data(); }
  const DequantizeTask* band_dequantize() const { return band_dequantize_.data(); }
  const int32_t* logit_rows() const { return logit_rows_.data(); }
  const StepCounts* counts() const { return counts_.data(); }
  // The attention kernels' view of the step: its rows, page table, counts and work items.
  void fill_attention_args(AttentionArgs& args) const {
    args.rows = rows();
    args.page_table = page_table();
    args.counts = counts();
    args.decode_items = decode_items();
    args.block_items = block_items();
    args.prefill_pages = prefill_pages();
  }

 private:
  DeviceBuffer<int32_t> tokens_;
  DeviceBuffer<QueryRow> rows_;
  DeviceBuffer<PageIds> page_table_;
  DeviceBuffer<DecodeItem> decode_items_;
  DeviceBuffer<BlockItem> block_items_;
  DeviceBuffer<CombineTask> combine_;
  DeviceBuffer<MigrateTask> migrate_;
  DeviceBuffer<MigrateTask> band_migrate_;
  DeviceBuffer<KeyGroupTask> key_groups_;
  DeviceBuffer<PageIds> prefill_pages_;
  DeviceBuffer<DequantizeTask> dequantize_;
  DeviceBuffer<DequantizeTask> band_dequantize_;
  DeviceBuffer<int32_t> logit_rows_;
  DeviceBuffer<StepCounts> counts_;
  PinnedBuffer<std::byte> staging_;
};

// Activation buffers of a step, sized for the largest step so far.
struct Workspace {
  DeviceBuffer<float> hidden;           // [rows][hidden], the float32 residual stream
  DeviceBuffer<float> delta;            // [rows][hidden], a block's output before the residual add
  DeviceBuffer<float> qkv;              // [rows][q_dim + 2 kv_dim]
  DeviceBuffer<float> rotated_queries;  // [rows][q_dim]
  DeviceBuffer<float> gate_up;  // [rows][2 intermediate] (gate_up_layout.h), more than 32 rows
  // The LM head's slices of the vocabulary, each [logit rows][width]; with tensor parallelism the
  // ranks' slices gathered, in rank order.
  DeviceBuffer<float> logits;
  DeviceBuffer<float> partials;               // attention partial records
  DeviceBuffer<__nv_bfloat16> normed;         // [rows][hidden]
  DeviceBuffer<__nv_bfloat16> attention;      // [rows][q_dim]
  DeviceBuffer<__nv_bfloat16> activation;     // [rows][intermediate]
  DeviceBuffer<__nv_bfloat16> normed_logits;  // [logit rows][hidden]

  // Grows to hold a step of `config`'s shapes (a rank's share), `logit_columns` logits a row (the
  // whole vocabulary); returns true when a buffer moved.
  bool reserve(const ModelConfig& config, int64_t rows, int64_t logit_rows, int64_t logit_columns,
               int64_t partial_floats);
};

}  // namespace oscar::cuda
