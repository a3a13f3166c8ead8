#include "backend/cuda/step_plan.h"

#include <algorithm>
#include <numeric>

#include "util/error.h"

namespace oscar::cuda {
namespace {

struct Segment {
  int64_t begin = 0;
  int64_t end = 0;
  KeyPages pages = KeyPages::full;
};

// The keys the query of `row` (at position t) reads, in position order, as cpu_attention splits
// them: full precision [0, a), 2-bit [sink, c), band [c, b), full precision [max(a, b), t]
// (a = min(sink, t + 1), b = quantized_end(t + 1), c = band_begin(t + 1)); the two full ranges
// merge when nothing lies between them.
std::vector<Segment> decode_segments(const QueryRow& row, int64_t sink) {
  const int64_t t = row.position;
  const int64_t a = std::min(sink, t + 1);
  const int64_t quantized_stop = std::min<int64_t>(row.quantized_end, t + 1);
  const int64_t band_start = std::max<int64_t>(sink, row.band_begin);
  const int64_t tail_start = std::max<int64_t>(a, row.quantized_end);
  std::vector<Segment> segments;
  if (quantized_stop <= sink) {
    segments.push_back({0, t + 1, KeyPages::full});
    return segments;
  }
  if (a > 0) segments.push_back({0, a, KeyPages::full});
  if (band_start > sink)
    segments.push_back({sink, std::min(band_start, quantized_stop), KeyPages::quantized});
  if (band_start < quantized_stop) segments.push_back({band_start, quantized_stop, KeyPages::band});
  if (tail_start <= t) segments.push_back({tail_start, t + 1, KeyPages::full});
  return segments;
}

// [begin, end) cut at multiples of `split` counted from `origin` (a multiple of
// kDecodeSplitAlignment, so that every cut falls on a tile boundary of each format). With `waves`
// > 0 (the decode kernel's quantized keys: guided self-scheduling), the range's share of the
// launch's last wave (its last 1 / waves, at most a quarter) is cut at multiples of about
// split / 4 instead. Sorted longest first (make_step_plan), the small pieces are what the blocks
// that finish early take at the end of the launch, so that no block runs a whole long piece while
// the others wait. Small pieces keep at least two super-tiles per warp (512 positions): below that
// each one's pipeline fill and merge cost more than the evening out gains (at batch 1), and so does
// cutting a quarter of every row when the launch has tens of waves.
template <typename Visit>
void for_each_split(int64_t begin, int64_t end, int64_t origin, int64_t split, int64_t waves,
                    Visit visit) {
  constexpr int64_t kSmallestFinePiece = 2 * kDecodeSplitAlignment;
  const int64_t quarter = split / 4 / kDecodeSplitAlignment * kDecodeSplitAlignment;
  const int64_t fine = quarter >= kSmallestFinePiece && waves > 0 ? quarter : split;
  const int64_t fine_from = end - (end - begin) / std::max<int64_t>(4, waves);
  for (int64_t b = begin; b < end;) {
    const int64_t step = b >= fine_from ? fine : split;
    const int64_t e = std::min(end, origin + ((b - origin) / step + 1) * step);
    visit(b, e);
    b = e;
  }
}

int64_t ceil_div(int64_t value, int64_t divisor) {
  return (value + divisor - 1) / divisor;
}
int64_t round_up(int64_t value, int64_t multiple) {
  return ceil_div(value, multiple) * multiple;
}

int32_t narrow(int64_t value) {
  require(value >= 0 && value <= INT32_MAX, "CUDA step plan: value {} does not fit 32 bits", value);
  return int32_t(value);
}

// The tensor-core prefill kernel's view of a prefilling sequence whose step rows run from `first`
// to `last`: its pages in StepPlan::prefill_pages, each quantized page some row reads given a
// scratch page and a task that dequantizes the slots read: 2-bit keys [sink, band_begin(last + 1)),
// band keys [band_begin(first + 1), quantized_end(last + 1)) (the rows' ranges grow with t).
// Returns the sequence's index in prefill_pages.
int64_t add_prefill_pages(const SequenceStep& step, const QueryRow& first, const QueryRow& last,
                          const KvCacheConfig& kv, StepPlan& plan) {
  const int64_t table = int64_t(plan.prefill_pages.size());
  const int64_t page_size = kv.page_size_tokens;
  auto add_task = [&](int32_t source, int64_t page, int64_t begin, int64_t end,
                      std::vector<DequantizeTask>& tasks) {
    begin = std::max(begin, page * page_size);
    end = std::min(end, (page + 1) * page_size);
    if (source < 0 || begin >= end) return -1;
    const int32_t scratch = narrow(plan.scratch_pages());
    tasks.push_back(
        {source, scratch, narrow(begin - page * page_size), narrow(end - page * page_size)});
    return int(scratch);
  };
  const std::vector<LogicalPage>& pages = step.kv->pages();
  for (int64_t p = 0; p < int64_t(pages.size()); ++p) {
    PageIds ids{pages[size_t(p)].full, -1, -1};
    if (kv.quantized()) {
      ids.quantized =
          add_task(pages[size_t(p)].quantized, p, kv.sink_tokens, last.band_begin, plan.dequantize);
    }
    if (kv.has_band()) {
      ids.band =
          add_task(pages[size_t(p)].band, p, std::max<int64_t>(kv.sink_tokens, first.band_begin),
                   last.quantized_end, plan.band_dequantize);
    }
    plan.prefill_pages.push_back(ids);
  }
  return table;
}

}  // namespace

StepCounts StepPlan::counts() const {
  return {int32_t(decode_items.size()), int32_t(block_items.size()), int32_t(migrate.size()),
          int32_t(key_groups.size()), int32_t(band_migrate.size())};
}

void StepPlan::clear() {
  tokens.clear();
  rows.clear();
  page_table.clear();
  decode_items.clear();
  block_items.clear();
  combine.clear();
  migrate.clear();
  band_migrate.clear();
  key_groups.clear();
  prefill_pages.clear();
  dequantize.clear();
  band_dequantize.clear();
  logit_rows.clear();
  partial_records = 0;
  decode_split_tokens = 0;
  decode_only = false;
  migrations_read_earlier_steps = true;
}

int64_t StepPlan::max_splits() const {
  int64_t most = 0;
  for (const CombineTask& task : combine) most = std::max<int64_t>(most, task.count);
  return most;
}

int64_t decode_split_tokens(std::span<const int64_t> decode_rows, bool quantized_cache,
                            const StepPlanShape& shape) {
  int64_t total_key_positions = 0, longest_row = 0;
  for (const int64_t row : decode_rows) {
    total_key_positions += row;
    longest_row = std::max(longest_row, row);
  }
  const int64_t work = total_key_positions * shape.num_kv_heads;
  const int64_t slots = std::max<int64_t>(1, shape.resident_blocks);
  auto split_for_waves = [&](int64_t waves) {
    const int64_t target = waves * slots;
    return std::clamp<int64_t>(round_up(work / target, kDecodeSplitAlignment),
                               kDecodeSplitAlignment, kLongestDecodeSplit);
  };
  auto pieces = [&](int64_t split) {
    int64_t count = 0;
    for (const int64_t row : decode_rows) count += ceil_div(row, split);
    return count * shape.num_kv_heads;
  };
  if (quantized_cache) {
    const int64_t one_wave = split_for_waves(1);
    if (4 * one_wave > longest_row) {
      // Short rows. Where a unit per row and KV head fills half a wave or more and the rows are 4K
      // or shorter (kWholeDecodeRow), one split a row: each piece's setup and merge cost more than
      // the waves' balance gains. Rows of 8K in one split were slower without the band and barely
      // faster with it, so they keep two waves' splits.
      const int64_t row_units = int64_t(decode_rows.size()) * shape.num_kv_heads;
      if (2 * row_units >= slots && longest_row <= kWholeDecodeRow) {
        return round_up(longest_row, kDecodeSplitAlignment);
      }
      return split_for_waves(2);
    }
    if (one_wave < kLongestDecodeSplit) return one_wave;
    // Many waves of the longest split: longer pieces still leaving kManyWaves waves, fewer pieces'
    // fill and merge to pay.
    for (const int64_t split : kLongerDecodeSplits) {
      if (pieces(split) >= kManyWaves * slots) return split;
    }
    return kLongestDecodeSplit;
  }
  // Full precision: the shortest split in multiples of kFullDecodeSplitAlignment whose pieces,
  // counted row by row, fill at most one wave (else two, three or four), so that the last wave's
  // longest piece is as short as the rows allow.
  for (int64_t waves = 1; waves <= kFullDecodeWaves; ++waves) {
    const int64_t budget = waves * slots;
    const int64_t even = ceil_div(work, budget);
    int64_t split = std::max(kDecodeSplitAlignment, round_up(even, kFullDecodeSplitAlignment));
    while (split < kLongestDecodeSplit && pieces(split) > budget)
      split += kFullDecodeSplitAlignment;
    if (split < kLongestDecodeSplit && 2 * split <= longest_row) return split;
  }
  return split_for_waves(2);
}

void make_step_plan(std::span<const SequenceStep> steps, const KvCacheConfig& kv,
                    const StepPlanShape& shape, StepPlan& plan) {
  plan.clear();
  const int64_t heads = shape.num_kv_heads;
  const int64_t block_rows = shape.tensor_core_prefill ? kTensorCoreBlockRows : kBlockQueryRows;
  const int64_t block_tokens = std::max<int64_t>(1, block_rows / shape.group);
  plan.decode_only = !steps.empty();
  std::vector<int64_t> decode_rows;  // key positions of each single-token row
  for (const SequenceStep& step : steps) {
    require(step.kv != nullptr && !step.tokens.empty(), "forward: a step needs tokens and pages");
    if (step.tokens.size() != 1) plan.decode_only = false;
    if (step.tokens.size() == 1) decode_rows.push_back(step.kv->num_tokens() + 1);
  }
  const int64_t decode_positions =
      std::accumulate(decode_rows.begin(), decode_rows.end(), int64_t(0));
  plan.decode_split_tokens = shape.split_tokens > 0
                                 ? shape.split_tokens
                                 : decode_split_tokens(decode_rows, kv.quantized(), shape);
  const int64_t alignment = kv.quantized() ? kDecodeSplitAlignment : kFullDecodeSplitAlignment;
  require(plan.decode_split_tokens % alignment == 0,
          "CUDA step plan: the decode split {} is not a multiple of {}", plan.decode_split_tokens,
          alignment);
  const int64_t split = plan.decode_split_tokens;
  const int64_t split_units = split * std::max<int64_t>(1, shape.resident_blocks);
  const int64_t waves = ceil_div(decode_positions * heads, split_units);

  for (const SequenceStep& step : steps) {
    const int64_t cached = step.kv->num_tokens();
    const int64_t count = int64_t(step.tokens.size());
    const int64_t until = step.kv->full_precision_until();
    const int64_t table = int64_t(plan.page_table.size());
    for (const LogicalPage& page : step.kv->pages())
      plan.page_table.push_back({page.full, page.quantized, page.band});
    const int64_t first_row = int64_t(plan.rows.size());
    for (int64_t i = 0; i < count; ++i) {
      const int64_t t = cached + i;
      plan.tokens.push_back(step.tokens[size_t(i)]);
      plan.rows.push_back({narrow(t), narrow(table), narrow(quantized_end(kv, t + 1, until)),
                           narrow(band_begin(kv, t + 1, until))});
    }
    // Attention work.
    if (count == 1) {
      const QueryRow& row = plan.rows.back();
      const int64_t base = plan.partial_records;
      int64_t splits = 0;
      if (shape.fast_decode) {
        for (const Segment& s : decode_segments(row, kv.sink_tokens)) {
          // Full-precision keys keep even splits: their kernel path holds one tile in flight per
          // warp, so its short pieces cost more than the evening out gains. The band is a few
          // splits long at most. The recent window is cut from its own start, so that it stays one
          // piece wherever it lies: cut at multiples of the split from position 0, the window of a
          // context of 4096 k + 1 positions left its last key alone in a piece, a whole block's
          // setup and merge for one key (32K x 8: 64 of 1088 pieces).
          const int64_t tail_waves = s.pages == KeyPages::quantized ? waves : 0;
          const bool window = s.pages == KeyPages::full && s.begin > 0;
          const int64_t origin =
              window ? s.begin / kDecodeSplitAlignment * kDecodeSplitAlignment : 0;
          for_each_split(s.begin, s.end, origin, split, tail_waves, [&](int64_t b, int64_t e) {
            plan.decode_items.push_back({narrow(first_row), s.pages, narrow(b), narrow(e),
                                         narrow(base + splits * heads), row.page_table});
            ++splits;
          });
        }
      } else {
        for_each_split(0, int64_t(row.position) + 1, 0, split, 0, [&](int64_t b, int64_t e) {
          plan.block_items.push_back(
              {narrow(first_row), 1, narrow(b), narrow(e), narrow(base + splits * heads), -1});
          ++splits;
        });
      }
      plan.combine.push_back({narrow(base), narrow(splits), narrow(heads)});
      plan.partial_records += splits * heads;
    } else {
      const int64_t prefill_table =
          shape.tensor_core_prefill
              ? add_prefill_pages(step, plan.rows[size_t(first_row)], plan.rows.back(), kv, plan)
              : -1;
      for (int64_t j = 0; j < count; j += block_tokens) {
        const int64_t n = std::min(block_tokens, count - j);
        if (shape.tensor_core_prefill) {  // the kernel writes the rows' output (attention_args.h)
          plan.block_items.push_back({narrow(first_row + j), narrow(n), 0, narrow(cached + j + n),
                                      -1, int32_t(prefill_table)});
          for (int64_t r = 0; r < n; ++r) plan.combine.push_back({0, 0, 0});
          continue;
        }
        const int64_t base = plan.partial_records;
        plan.block_items.push_back(
            {narrow(first_row + j), narrow(n), 0, narrow(cached + j + n), narrow(base), -1});
        for (int64_t r = 0; r < n; ++r)
          plan.combine.push_back({narrow(base + r * heads), 1, narrow(heads)});
        plan.partial_records += n * heads;
      }
    }
    // Tokens leaving the recent window during this step (CpuKvStore::quantize's range).
    const int64_t q0 = quantized_end(kv, cached, until);
    const int64_t q1 = quantized_end(kv, cached + count, until);
    for (int64_t p = q0; p < q1; ++p) plan.migrate.push_back({narrow(p), narrow(table)});
    // ... and those of them that some query of the step reads from the band (CpuKvStore::quantize's
    // band_from).
    if (kv.has_band()) {
      for (int64_t p = std::max(q0, band_step_begin(kv, cached, cached + count, until)); p < q1;
           ++p) {
        plan.band_migrate.push_back({narrow(p), narrow(table)});
      }
    }
    if (q0 < q1 && q1 > cached) plan.migrations_read_earlier_steps = false;
    if (kv.keys_per_channel() && q0 < q1) {
      const int64_t g = kv.group_size;
      for (int64_t group_start = q0 / g * g; group_start < q1; group_start += g) {
        const int64_t first = std::max(group_start, q0);
        const int64_t last = std::min(group_start + g, q1);
        plan.key_groups.push_back({narrow(first), narrow(last - first), narrow(table)});
      }
    }
    // Rows whose logits are returned.
    for (int64_t i = step.all_logits ? 0 : count - 1; i < count; ++i) {
      plan.logit_rows.push_back(narrow(first_row + i));
    }
  }
  // The decode kernel's blocks take items in this order: the longest first (each item names its
  // own partial record, so the order is free), a position counted by the bits the kernel reads for
  // it: 16 at full precision, the code bits if quantized or in the band.
  const int64_t cost_per_position[] = {16, std::max(1, kv.bits()), kv.band_config().bits()};
  auto cost = [&](const DecodeItem& item) {
    return int64_t(item.end - item.begin) * cost_per_position[int(item.pages)];
  };
  std::stable_sort(plan.decode_items.begin(), plan.decode_items.end(),
                   [&](const DecodeItem& x, const DecodeItem& y) { return cost(x) > cost(y); });
  // The tensor-core kernel's blocks start in launch order, one item and KV head each, as the
  // multiprocessors free up: the longest items first, so that none starts last and runs alone.
  if (shape.tensor_core_prefill) {
    std::stable_sort(plan.block_items.begin(), plan.block_items.end(),
                     [](const BlockItem& x, const BlockItem& y) {
                       return x.key_end - x.key_begin > y.key_end - y.key_begin;
                     });
  }
}

}  // namespace oscar::cuda
