#include "backend/cuda/device_step.h"

#include <cstring>
#include <vector>

#include "model/model_config.h"

namespace oscar::cuda {
namespace {

size_t grown(size_t needed) {
  return needed + needed / 2 + 16;
}

template <typename T>
bool reserve_grown(DeviceBuffer<T>& buffer, size_t count) {
  if (count <= buffer.size()) return false;
  buffer.resize(grown(count));
  return true;
}

size_t aligned(size_t bytes) {
  return (bytes + 15) / 16 * 16;
}

}  // namespace

bool DeviceStep::upload(const StepPlan& plan, cudaStream_t stream) {
  bool moved = false;
  moved |= reserve_grown(tokens_, plan.tokens.size());
  moved |= reserve_grown(rows_, plan.rows.size());
  moved |= reserve_grown(page_table_, plan.page_table.size());
  moved |= reserve_grown(decode_items_, plan.decode_items.size());
  moved |= reserve_grown(block_items_, plan.block_items.size());
  moved |= reserve_grown(combine_, plan.combine.size());
  moved |= reserve_grown(migrate_, plan.migrate.size());
  moved |= reserve_grown(band_migrate_, plan.band_migrate.size());
  moved |= reserve_grown(key_groups_, plan.key_groups.size());
  // Read by prefill steps only, which are never captured: their moves leave the graphs valid.
  reserve_grown(prefill_pages_, plan.prefill_pages.size());
  reserve_grown(dequantize_, plan.dequantize.size());
  reserve_grown(band_dequantize_, plan.band_dequantize.size());
  moved |= reserve_grown(logit_rows_, plan.logit_rows.size());
  moved |= reserve_grown(counts_, 1);
  const StepCounts counts = plan.counts();
  struct Section {
    const void* source;
    size_t bytes;
    void* target;
  };
  const Section sections[] = {
      {plan.tokens.data(), plan.tokens.size() * sizeof(int32_t), tokens_.data()},
      {plan.rows.data(), plan.rows.size() * sizeof(QueryRow), rows_.data()},
      {plan.page_table.data(), plan.page_table.size() * sizeof(PageIds), page_table_.data()},
      {plan.decode_items.data(), plan.decode_items.size() * sizeof(DecodeItem),
       decode_items_.data()},
      {plan.block_items.data(), plan.block_items.size() * sizeof(BlockItem), block_items_.data()},
      {plan.combine.data(), plan.combine.size() * sizeof(CombineTask), combine_.data()},
      {plan.migrate.data(), plan.migrate.size() * sizeof(MigrateTask), migrate_.data()},
      {plan.band_migrate.data(), plan.band_migrate.size() * sizeof(MigrateTask),
       band_migrate_.data()},
      {plan.key_groups.data(), plan.key_groups.size() * sizeof(KeyGroupTask), key_groups_.data()},
      {plan.prefill_pages.data(), plan.prefill_pages.size() * sizeof(PageIds),
       prefill_pages_.data()},
      {plan.dequantize.data(), plan.dequantize.size() * sizeof(DequantizeTask), dequantize_.data()},
      {plan.band_dequantize.data(), plan.band_dequantize.size() * sizeof(DequantizeTask),
       band_dequantize_.data()},
      {plan.logit_rows.data(), plan.logit_rows.size() * sizeof(int32_t), logit_rows_.data()},
      {&counts, sizeof(StepCounts), counts_.data()},
  };
  size_t total = 0;
  for (const Section& s : sections) total += aligned(s.bytes);
  staging_.reserve(grown(total));
  size_t offset = 0;
  for (const Section& s : sections) {
    if (s.bytes == 0) continue;
    std::memcpy(staging_.data() + offset, s.source, s.bytes);
    check(cudaMemcpyAsync(s.target, staging_.data() + offset, s.bytes, cudaMemcpyHostToDevice,
                          stream),
          "cudaMemcpyAsync(step plan)");
    offset += aligned(s.bytes);
  }
  return moved;
}

bool Workspace::reserve(const ModelConfig& c, int64_t rows, int64_t logit_rows,
                        int64_t logit_columns, int64_t partial_floats) {
  const size_t r = size_t(rows), l = size_t(logit_rows);
  bool moved = false;
  moved |= reserve_grown(hidden, r * size_t(c.hidden_size));
  moved |= reserve_grown(delta, r * size_t(c.hidden_size));
  moved |= reserve_grown(qkv, r * size_t(c.q_dim() + 2 * c.kv_dim()));
  moved |= reserve_grown(rotated_queries, r * size_t(c.q_dim()));
  moved |= reserve_grown(gate_up, r * size_t(2 * c.intermediate_size));
  moved |= reserve_grown(logits, l * size_t(logit_columns));
  moved |= reserve_grown(partials, size_t(partial_floats));
  moved |= reserve_grown(normed, r * size_t(c.hidden_size));
  moved |= reserve_grown(attention, r * size_t(c.q_dim()));
  moved |= reserve_grown(activation, r * size_t(c.intermediate_size));
  moved |= reserve_grown(normed_logits, l * size_t(c.hidden_size));
  return moved;
}

}  // namespace oscar::cuda
