// The CUDA step plan's decode split (plain C++, runs without a GPU): every key position a decode
// row reads is in exactly one item of the right format (the band's too), items come longest
// first, the last wave of a long quantized range is cut finer, the recent window stays one piece,
// and each item has its own partial record; when the migrations may run before the first layer,
// and which migrated tokens get band copies; a plan filled over an earlier step's is a fresh one.
#include <fmt/format.h>
#include <gtest/gtest.h>

#ifdef OSCAR_HAVE_CUDA

#include <algorithm>
#include <cstring>
#include <set>

#include "backend/cuda/step_plan.h"

namespace oscar::cuda {
namespace {

struct PlannedRows {
  KvCacheConfig kv;
  std::vector<SequencePages> sequences;
  std::vector<int32_t> tokens;
  StepPlan plan;

  PlannedRows(const std::vector<int64_t>& contexts, int64_t resident_blocks,
              KvDtype dtype = KvDtype::int2, int64_t band_tokens = 0) {
    kv.dtype = dtype;
    kv.group_size = 128;
    kv.sink_tokens = 64;
    kv.recent_tokens = 256;
    kv.band_tokens = band_tokens;
    kv.page_size_tokens = 64;
    sequences.resize(contexts.size());
    tokens.assign(contexts.size(), 1);
    std::vector<SequenceStep> steps;
    int32_t next_page = 0;
    for (size_t s = 0; s < contexts.size(); ++s) {
      std::vector<LogicalPage> pages;
      for (int64_t p = 0; p <= contexts[s] / kv.page_size_tokens; ++p, next_page += 3) {
        pages.push_back(
            {next_page, kv.quantized() ? next_page + 1 : -1, kv.has_band() ? next_page + 2 : -1});
      }
      sequences[s].attach_prefix(pages, contexts[s]);
      steps.push_back({std::span(&tokens[s], 1), &sequences[s], false});
    }
    make_step_plan(
        steps, kv,
        {.num_kv_heads = 8, .group = 4, .fast_decode = true, .resident_blocks = resident_blocks},
        plan);
  }
};

// Without a band and with one of 768 tokens (short rows, rows whose band is cut by the sink, long
// rows).
TEST(CudaStepPlan, DecodeItemsCoverEachRowOnceInTheRightFormat) {
  const std::vector<int64_t> contexts = {37, 700, 1500, 9001, 32767};
  for (const int64_t band : {0, 768}) {
    const PlannedRows p(contexts, 528, KvDtype::int2, band);
    for (size_t row = 0; row < contexts.size(); ++row) {
      const int64_t t = contexts[row];  // the new token's position
      const int64_t quantized_stop = quantized_end(p.kv, t + 1),
                    band_start = band_begin(p.kv, t + 1);
      ASSERT_EQ(p.plan.rows[row].quantized_end, quantized_stop);
      ASSERT_EQ(p.plan.rows[row].band_begin, band_start);
      EXPECT_EQ(band_start, band == 0 ? quantized_stop
                                      : std::max<int64_t>(p.kv.sink_tokens, quantized_stop - band));
      std::vector<int> seen(size_t(t + 1), 0);
      for (const DecodeItem& item : p.plan.decode_items) {
        if (item.row != int32_t(row)) continue;
        ASSERT_LT(item.begin, item.end);
        EXPECT_EQ(item.page_table, p.plan.rows[row].page_table) << "row " << row;
        for (int64_t j = item.begin; j < item.end; ++j) {
          ++seen[size_t(j)];
          const bool quantized = j >= p.kv.sink_tokens && j < quantized_stop;
          const KeyPages expected = !quantized        ? KeyPages::full
                                    : j >= band_start ? KeyPages::band
                                                      : KeyPages::quantized;
          EXPECT_EQ(item.pages, expected)
              << "band " << band << ", row " << row << ", position " << j;
        }
      }
      for (int64_t j = 0; j <= t; ++j)
        ASSERT_EQ(seen[size_t(j)], 1) << "row " << row << " position " << j;
    }
  }
}

TEST(CudaStepPlan, DecodeItemsComeLongestFirstWithTheirOwnRecords) {
  const PlannedRows p({9001, 32767, 32767, 700}, 528, KvDtype::int2, 768);
  const auto& items = p.plan.decode_items;
  auto bits = [](const DecodeItem& item) {
    const int64_t per_position = item.pages == KeyPages::quantized ? 2
                                 : item.pages == KeyPages::band    ? 4
                                                                   : 16;
    return int64_t(item.end - item.begin) * per_position;
  };
  for (size_t i = 1; i < items.size(); ++i)
    EXPECT_GE(bits(items[i - 1]), bits(items[i])) << "item " << i;
  std::set<int32_t> records;
  for (const DecodeItem& item : items) {
    EXPECT_TRUE(records.insert(item.partial).second) << "record " << item.partial << " used twice";
    EXPECT_LE(item.partial + 8, p.plan.partial_records);
  }
  int64_t splits = 0;
  for (const CombineTask& task : p.plan.combine) splits += task.count;
  EXPECT_EQ(splits, int64_t(items.size()));
}

// Positions of row 0's quantized range in quarter pieces, checking every piece's size: the first
// piece (from the sink to a multiple of the split) and the last (to the row's end) may be shorter.
int64_t fine_positions(const PlannedRows& p, int64_t& fine_pieces) {
  const int64_t split = p.plan.decode_split_tokens;
  const int64_t end = p.plan.rows[0].quantized_end;
  int64_t total = 0;
  fine_pieces = 0;
  for (const DecodeItem& item : p.plan.decode_items) {
    if (item.pages != KeyPages::quantized || item.row != 0) continue;
    const int64_t length = item.end - item.begin;
    EXPECT_LE(length, split);
    if (length == split || item.begin == p.kv.sink_tokens || item.end == end) continue;
    EXPECT_LE(length, split / 4);
    EXPECT_GE(length, 2 * kDecodeSplitAlignment);
    total += length;
    ++fine_pieces;
  }
  return total;
}

TEST(CudaStepPlan, LastWaveOfEachRowIsCutFiner) {
  // About 8 waves of 132 blocks: an eighth of each row in quarter splits.
  const PlannedRows few({131071, 131071, 131071, 131071}, 132);
  const int64_t split = few.plan.decode_split_tokens;
  ASSERT_GE(split / 4, 2 * kDecodeSplitAlignment);
  const int64_t length = few.plan.rows[0].quantized_end - few.kv.sink_tokens;
  int64_t pieces = 0;
  const int64_t fine = fine_positions(few, pieces);
  EXPECT_GE(pieces, 8);
  EXPECT_GE(fine, length / 8 - split);
  EXPECT_LE(fine, length / 8 + split);
  // About 40 waves: far less of each row.
  const PlannedRows many(std::vector<int64_t>(64, 131071), 396);
  EXPECT_LE(fine_positions(many, pieces), length / 40 + split);
}

TEST(CudaStepPlan, FullPrecisionRowsKeepEvenSplits) {
  const PlannedRows p({131071, 131071, 131071, 131071}, 132, KvDtype::bf16);
  const int64_t split = p.plan.decode_split_tokens;
  for (const DecodeItem& item : p.plan.decode_items) {
    if (item.end <= p.plan.rows[size_t(item.row)].position) {
      EXPECT_EQ(item.end % split, 0) << "item [" << item.begin << ", " << item.end << ")";
    }
  }
}

TEST(CudaStepPlan, ShortSplitsAreNotCutFiner) {
  const PlannedRows p({65535}, 528);
  const int64_t split = p.plan.decode_split_tokens;
  ASSERT_LT(split / 4, 2 * kDecodeSplitAlignment);
  int64_t pieces = 0;
  for (const DecodeItem& item : p.plan.decode_items) pieces += item.pages == KeyPages::quantized;
  const int64_t quantized_positions = p.plan.rows[0].quantized_end - p.kv.sink_tokens;
  EXPECT_LE(pieces, quantized_positions / split + 2);
}

// The recent window is one piece wherever it lies (cut at multiples of the split from position 0,
// the window of a context of 4096 k + 1 positions left its last key alone in a piece), with and
// without a band; the other ranges keep their cuts at multiples of the split.
TEST(CudaStepPlan, RecentWindowIsOnePieceWhereverItLies) {
  const std::vector<int64_t> contexts = {32768, 131072, 32768 + 100, 9001, 4096};
  for (const int64_t band : {0, 768}) {
    for (const int64_t resident : {132, 396}) {
      const PlannedRows p(contexts, resident, KvDtype::int2, band);
      const int64_t split = p.plan.decode_split_tokens;
      ASSERT_GE(split, 1024);
      for (size_t row = 0; row < contexts.size(); ++row) {
        const QueryRow& r = p.plan.rows[row];
        const std::string where = fmt::format("band {}, resident {}, row {}", band, resident, row);
        int64_t window_pieces = 0;
        for (const DecodeItem& item : p.plan.decode_items) {
          if (item.row != int32_t(row)) continue;
          if (item.pages == KeyPages::full && item.begin > 0) {
            ++window_pieces;
            EXPECT_EQ(item.begin, r.quantized_end) << where;
            EXPECT_EQ(item.end, r.position + 1) << where;
          } else if (item.pages == KeyPages::quantized && item.end < r.band_begin) {
            EXPECT_EQ(item.end % kDecodeSplitAlignment, 0)
                << where << ": [" << item.begin << ", " << item.end << ")";
          }
        }
        EXPECT_EQ(window_pieces, 1) << where;
      }
    }
  }
}

// About one wave of splits for a quantized cache whose rows get four splits or more, two waves
// otherwise, in multiples of 256 from 256 to 4096 (8192 or 6144 where that leaves four waves of
// them); for a bf16 cache, the shortest multiple of 64
// whose pieces fit one wave (then two, three or four) and cut the longest row into two splits or
// more, else 4096.
TEST(CudaStepPlan, SplitSizeFollowsTheWaveCount) {
  const StepPlanShape shape{
      .num_kv_heads = 8, .group = 4, .fast_decode = true, .resident_blocks = 396};
  auto rows = [](int64_t count, int64_t positions) {
    return std::vector<int64_t>(size_t(count), positions);
  };
  EXPECT_EQ(decode_split_tokens(rows(1, 32769), true, shape), 768);  // 262152 / 396 = 662
  // bf16, one wave: 47 pieces of 704 (8 heads: 376 of 396 blocks), eleven tiles per warp where 768
  // gives twelve.
  EXPECT_EQ(decode_split_tokens(rows(1, 32769), false, shape), 704);
  EXPECT_EQ(decode_split_tokens(rows(1, 131073), false, shape), 2688);  // 49 pieces: 392 blocks
  // 8K x 16: 2688 cuts each row in four (512 pieces), 2752 in three (384).
  EXPECT_EQ(decode_split_tokens(rows(16, 8193), false, shape), 2752);
  EXPECT_EQ(decode_split_tokens(rows(16, 4097), false, shape), 1408);  // 1408 + 1408 + 1281
  // 4K x 32: no one-wave split cuts a row in two (512 pieces); two waves of three pieces a row.
  EXPECT_EQ(decode_split_tokens(rows(32, 4097), false, shape), 1408);
  EXPECT_EQ(decode_split_tokens(rows(8, 32769), true, shape), 4096);
  EXPECT_EQ(decode_split_tokens(rows(8, 32769), false, shape), 2752);  // one wave would be 4096
  // Short rows filling half a wave or more, a unit a row and KV head: one split a row of 4K (4K x
  // 32: 256 units for 396 blocks), else two waves (4K x 16: 128 units; 8K x 16; 8K x 32: one wave
  // would be 4096, two splits per row).
  EXPECT_EQ(decode_split_tokens(rows(32, 4097), true, shape), 4352);
  EXPECT_EQ(decode_split_tokens(rows(64, 4097), true, shape), 4352);
  EXPECT_EQ(decode_split_tokens(rows(32, 8193), true, shape), 2816);
  EXPECT_EQ(decode_split_tokens(rows(16, 4097), true, shape), 768);
  EXPECT_EQ(decode_split_tokens(rows(16, 8193), true, shape), 1536);
  EXPECT_EQ(decode_split_tokens(rows(1, 100), true, shape), 256);
  EXPECT_EQ(decode_split_tokens(rows(1, 100), false, shape), 256);
  // Three or four waves where two fit no split: 4K x 64 in 3 x 512 pieces of 1408 (1536 of 1584;
  // 2 x 512 of 2112 would fit three waves but leave the row no two whole splits), 8K x 64 in
  // 3 x 512 of 2752, 32K x 16 in 9 x 128 of 3648 (three waves: 1152 of 1188).
  EXPECT_EQ(decode_split_tokens(rows(64, 4097), false, shape), 1408);
  EXPECT_EQ(decode_split_tokens(rows(64, 8193), false, shape), 2752);
  EXPECT_EQ(decode_split_tokens(rows(16, 32769), false, shape), 3648);
  EXPECT_EQ(decode_split_tokens(rows(64, 131073), false, shape), 4096);  // four waves: 42K a piece
  // Many waves of 4096 (quantized): the longest of 8192 and 6144 that keeps four waves (1584
  // pieces).
  EXPECT_EQ(decode_split_tokens(rows(64, 32769), true, shape), 8192);   // 5 x 512 = 2560 pieces
  EXPECT_EQ(decode_split_tokens(rows(16, 100001), true, shape), 8192);  // 13 x 128 = 1664
  EXPECT_EQ(decode_split_tokens(rows(28, 100001), true, shape), 8192);
  EXPECT_EQ(decode_split_tokens(rows(32, 40001), true, shape), 6144);  // 8192: 5 x 256 = 1280
  EXPECT_EQ(decode_split_tokens(rows(32, 32769), true, shape), 4096);  // 6144: 6 x 256 = 1536
  EXPECT_EQ(decode_split_tokens(rows(8, 131073), true, shape), 4096);  // 6144: 22 x 64 = 1408
  EXPECT_EQ(decode_split_tokens(rows(8, 100001), true, shape), 4096);
  // Rows of different lengths count their own pieces: 1000 and 32769 positions at 704 make 2 + 47
  // pieces, 392 blocks.
  const std::vector<int64_t> mixed = {1000, 32769};
  EXPECT_EQ(decode_split_tokens(mixed, false, shape), 704);
}

// Migrations may run before the first layer only when no token they read is written by the step.
TEST(CudaStepPlan, MigrationsReadEarlierStepsOnlyInDecodeStepsWithARecentWindow) {
  auto plan_for = [](int64_t cached, int64_t new_tokens, int64_t recent) {
    KvCacheConfig kv;
    kv.dtype = KvDtype::int2;
    kv.group_size = 128;
    kv.sink_tokens = 64;
    kv.recent_tokens = recent;
    kv.page_size_tokens = 64;
    std::vector<LogicalPage> pages;
    for (int32_t p = 0; p <= int32_t((cached + new_tokens) / kv.page_size_tokens); ++p)
      pages.push_back({2 * p, 2 * p + 1});
    SequencePages sequence;
    sequence.attach_prefix(pages, cached);
    const std::vector<int32_t> tokens(size_t(new_tokens), 1);
    const std::vector<SequenceStep> steps = {{std::span(tokens), &sequence, false}};
    StepPlan plan;
    make_step_plan(steps, kv,
                   {.num_kv_heads = 8, .group = 4, .fast_decode = true, .resident_blocks = 132},
                   plan);
    return plan;
  };
  const StepPlan decode = plan_for(1000, 1, 256);
  ASSERT_EQ(decode.migrate.size(), 1u);
  EXPECT_EQ(decode.migrate[0].position, 1001 - 256 - 1);
  EXPECT_TRUE(decode.migrations_read_earlier_steps);
  // A chunk longer than the window quantizes some of its own tokens.
  const StepPlan chunk = plan_for(100, 600, 256);
  ASSERT_FALSE(chunk.migrate.empty());
  EXPECT_GE(chunk.migrate.back().position, 100);
  EXPECT_FALSE(chunk.migrations_read_earlier_steps);
  // Without a recent window each new token is quantized in the step that writes it.
  const StepPlan no_window = plan_for(1000, 1, 0);
  ASSERT_EQ(no_window.migrate.size(), 1u);
  EXPECT_EQ(no_window.migrate[0].position, 1000);
  EXPECT_FALSE(no_window.migrations_read_earlier_steps);
}

// The migrated tokens that get band copies: those some query of the step reads from the band
// (band_step_begin), as CpuKvStore::quantize's band_from.
TEST(CudaStepPlan, BandCopiesAreMadeOfTheMigratedTokensTheStepReadsFromTheBand) {
  KvCacheConfig kv;
  kv.dtype = KvDtype::int2;
  kv.group_size = 128;
  kv.sink_tokens = 64;
  kv.recent_tokens = 256;
  kv.band_tokens = 768;
  kv.page_size_tokens = 64;
  auto plan_for = [&](int64_t cached, int64_t new_tokens, int64_t full_precision_until) {
    std::vector<LogicalPage> pages;
    for (int32_t p = 0; p <= int32_t((cached + new_tokens) / kv.page_size_tokens); ++p) {
      pages.push_back({3 * p, 3 * p + 1, 3 * p + 2});
    }
    SequencePages sequence(full_precision_until);
    sequence.attach_prefix(pages, cached);
    const std::vector<int32_t> tokens(size_t(new_tokens), 1);
    const std::vector<SequenceStep> steps = {{std::span(tokens), &sequence, false}};
    StepPlan plan;
    make_step_plan(steps, kv,
                   {.num_kv_heads = 8, .group = 4, .fast_decode = true, .resident_blocks = 132},
                   plan);
    return plan;
  };
  auto positions = [](const std::vector<MigrateTask>& tasks) {
    std::vector<int64_t> out;
    for (const MigrateTask& task : tasks) out.push_back(task.position);
    return out;
  };
  // A decode step: the one token leaving the window enters the band.
  const StepPlan decode = plan_for(5000, 1, 0);
  EXPECT_EQ(positions(decode.band_migrate), std::vector<int64_t>{5001 - 256 - 1});
  EXPECT_EQ(decode.counts().band_migrate_tasks, 1);
  // The first decode step after a prompt prefilled in full precision quantizes the whole prompt;
  // only its last 768 quantized tokens are read from the band.
  const StepPlan first = plan_for(5000, 1, 5000);
  ASSERT_EQ(first.migrate.size(), size_t(5001 - 256 - 64));
  ASSERT_EQ(first.band_migrate.size(), 768u);
  EXPECT_EQ(first.band_migrate.front().position, 5001 - 256 - 768);
  EXPECT_EQ(first.band_migrate.back().position, 5001 - 256 - 1);
  // A chunk's first query reads the band from band_begin(cached + 1): every token the chunk
  // migrates from there on gets a copy.
  const StepPlan chunk = plan_for(3000, 600, 0);
  EXPECT_EQ(positions(chunk.band_migrate), positions(chunk.migrate));
  // No band: no copies.
  kv.band_tokens = 0;
  EXPECT_TRUE(plan_for(5000, 1, 5000).band_migrate.empty());
}

// A prefill chunk beside a decode row: the float kernel's blocks write one partial record per row
// and KV head, which the combine normalises; the tensor-core kernel's blocks write their rows'
// output themselves, so those rows have no records and their combine tasks count none. The decode
// row keeps its records either way.
TEST(CudaStepPlan, TensorCorePrefillRowsHaveNoPartialRecords) {
  KvCacheConfig kv;
  kv.page_size_tokens = 64;
  auto pages_of = [&](int64_t cached, int64_t new_tokens, int32_t first_page) {
    std::vector<LogicalPage> pages;
    for (int32_t p = 0; p <= int32_t((cached + new_tokens) / 64); ++p)
      pages.push_back({first_page + p, -1, -1});
    SequencePages sequence;
    sequence.attach_prefix(pages, cached);
    return sequence;
  };
  SequencePages prompt = pages_of(0, 700, 0), decoding = pages_of(500, 1, 100);
  const std::vector<int32_t> prompt_tokens(700, 1), decode_token = {2};
  const std::vector<SequenceStep> steps = {{std::span(prompt_tokens), &prompt, true},
                                           {std::span(decode_token), &decoding, false}};
  for (const bool tensor_cores : {false, true}) {
    StepPlan plan;
    make_step_plan(steps, kv,
                   {.num_kv_heads = 8,
                    .group = 4,
                    .fast_decode = true,
                    .resident_blocks = 132,
                    .tensor_core_prefill = tensor_cores},
                   plan);
    ASSERT_EQ(plan.combine.size(), 701u);
    int64_t prefill_records = 0;
    for (size_t row = 0; row < 700; ++row) prefill_records += plan.combine[row].count;
    EXPECT_EQ(prefill_records, tensor_cores ? 0 : 700) << "tensor cores " << tensor_cores;
    EXPECT_GE(plan.combine[700].count, 1);
    for (const BlockItem& item : plan.block_items) {
      EXPECT_EQ(item.partial < 0, tensor_cores);
      EXPECT_EQ(item.prefill_table >= 0, tensor_cores);
    }
    EXPECT_EQ(plan.partial_records, (tensor_cores ? 0 : 700 * 8) + plan.combine[700].count * 8);
  }
}

// The backend fills one plan for all its steps (make_step_plan keeps the storage): a decode step
// planned over a prefill chunk's plan (block items, migrations, band copies, KIVI key groups,
// every row's logits) is the decode step's fresh plan, record for record.
TEST(CudaStepPlan, APlanFilledOverAnEarlierStepsIsAFreshOne) {
  auto sequence_of = [](int64_t cached, int64_t new_tokens, int32_t first_page) {
    std::vector<LogicalPage> pages;
    for (int32_t p = 0; p <= int32_t((cached + new_tokens) / 64); ++p) {
      pages.push_back({first_page + 3 * p, first_page + 3 * p + 1, first_page + 3 * p + 2});
    }
    SequencePages sequence;
    sequence.attach_prefix(pages, cached);
    return sequence;
  };
  const StepPlanShape shape{
      .num_kv_heads = 8, .group = 4, .fast_decode = true, .resident_blocks = 132};
  KvCacheConfig kivi;
  kivi.dtype = KvDtype::int2;
  kivi.method = KvMethod::kivi;
  kivi.group_size = 64;
  kivi.page_size_tokens = 64;
  SequencePages prompt = sequence_of(3000, 600, 0);
  const std::vector<int32_t> prompt_tokens(600, 1);
  const std::vector<SequenceStep> chunk = {{std::span(prompt_tokens), &prompt, true}};
  StepPlan reused;
  make_step_plan(chunk, kivi, shape, reused);
  ASSERT_FALSE(reused.block_items.empty());
  ASSERT_FALSE(reused.key_groups.empty());
  ASSERT_FALSE(reused.migrations_read_earlier_steps);

  KvCacheConfig oscar;
  oscar.dtype = KvDtype::int2;
  oscar.method = KvMethod::oscar;
  oscar.band_tokens = 768;
  oscar.page_size_tokens = 64;
  std::vector<SequencePages> sequences = {sequence_of(40000, 1, 0), sequence_of(9000, 1, 3000)};
  const std::vector<int32_t> tokens = {5, 6};
  const std::vector<SequenceStep> decode = {{std::span(&tokens[0], 1), &sequences[0], false},
                                            {std::span(&tokens[1], 1), &sequences[1], false}};
  make_step_plan(decode, oscar, shape, reused);
  StepPlan fresh;
  make_step_plan(decode, oscar, shape, fresh);
  ASSERT_FALSE(fresh.decode_items.empty());
  ASSERT_FALSE(fresh.band_migrate.empty());
  auto same = [](const auto& a, const auto& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(a[0])) == 0;
  };
  EXPECT_TRUE(same(reused.tokens, fresh.tokens));
  EXPECT_TRUE(same(reused.rows, fresh.rows));
  EXPECT_TRUE(same(reused.page_table, fresh.page_table));
  EXPECT_TRUE(same(reused.decode_items, fresh.decode_items));
  EXPECT_TRUE(same(reused.block_items, fresh.block_items));
  EXPECT_TRUE(same(reused.combine, fresh.combine));
  EXPECT_TRUE(same(reused.migrate, fresh.migrate));
  EXPECT_TRUE(same(reused.band_migrate, fresh.band_migrate));
  EXPECT_TRUE(same(reused.key_groups, fresh.key_groups));
  EXPECT_TRUE(same(reused.logit_rows, fresh.logit_rows));
  EXPECT_EQ(reused.partial_records, fresh.partial_records);
  EXPECT_EQ(reused.decode_split_tokens, fresh.decode_split_tokens);
  EXPECT_EQ(reused.decode_only, fresh.decode_only);
  EXPECT_EQ(reused.migrations_read_earlier_steps, fresh.migrations_read_earlier_steps);
}

// A serving step (Scheduler::schedule): decode rows at 32K, then a prompt's 8192-token chunk at
// 24K, in OSCAR's INT2 layout with the band. The decode rows go to the split-K decode kernel
// whole and only there; only the prompt's pages get scratch copies and their dequantize tasks;
// the tensor-core kernel's block items come longest first.
TEST(CudaStepPlan, AMixedStepDequantizesOnlyThePromptsPages) {
  KvCacheConfig kv;
  kv.dtype = KvDtype::int2;
  kv.group_size = 128;
  kv.band_tokens = 768;
  kv.page_size_tokens = 64;
  int32_t next_page = 0;
  auto sequence_of = [&](int64_t cached, int64_t new_tokens) {
    std::vector<LogicalPage> pages;
    for (int64_t p = 0; p <= (cached + new_tokens) / kv.page_size_tokens; ++p, next_page += 3)
      pages.push_back({next_page, next_page + 1, next_page + 2});
    SequencePages sequence;
    sequence.attach_prefix(pages, cached);
    return sequence;
  };
  const int64_t decodes = 3, context = 32768, cached = 24576, chunk = 8192;
  std::vector<SequencePages> rows;
  for (int64_t r = 0; r < decodes; ++r) rows.push_back(sequence_of(context + r, 1));
  const int32_t first_prompt_page = next_page;
  SequencePages prompt = sequence_of(cached, chunk);
  const std::vector<int32_t> decode_token = {2}, prompt_tokens(size_t(chunk), 1);
  std::vector<SequenceStep> steps;
  for (const SequencePages& row : rows) steps.push_back({std::span(decode_token), &row, false});
  steps.push_back({std::span(prompt_tokens), &prompt, false});
  StepPlan plan;
  make_step_plan(steps, kv,
                 {.num_kv_heads = 8,
                  .group = 4,
                  .fast_decode = true,
                  .resident_blocks = 396,
                  .tensor_core_prefill = true},
                 plan);
  ASSERT_EQ(int64_t(plan.rows.size()), decodes + chunk);
  // Each decode row's keys, every one of its positions once, in decode items.
  for (int64_t r = 0; r < decodes; ++r) {
    int64_t covered = 0;
    for (const DecodeItem& item : plan.decode_items) {
      if (item.row == r) covered += item.end - item.begin;
    }
    EXPECT_EQ(covered, context + r + 1) << "decode row " << r;
  }
  for (const DecodeItem& item : plan.decode_items) EXPECT_LT(item.row, decodes);
  // The block items hold the chunk's rows, each once, the longest first.
  int64_t block_rows = 0;
  for (size_t i = 0; i < plan.block_items.size(); ++i) {
    const BlockItem& item = plan.block_items[i];
    EXPECT_GE(item.first_row, decodes);
    EXPECT_EQ(item.prefill_table, 0);
    block_rows += item.row_count;
    if (i > 0) {
      const BlockItem& before = plan.block_items[i - 1];
      EXPECT_GE(before.key_end - before.key_begin, item.key_end - item.key_begin);
    }
  }
  EXPECT_EQ(block_rows, chunk);
  // Scratch: the prompt's pages only, its 2-bit pages up to the last row's band and its band
  // pages from the first row's band on.
  EXPECT_EQ(plan.prefill_pages.size(), prompt.pages().size());
  for (const PageIds& ids : plan.prefill_pages) EXPECT_GE(ids.full, first_prompt_page);
  const int64_t last_band = band_begin(kv, cached + chunk);
  EXPECT_EQ(int64_t(plan.dequantize.size()),
            (last_band + kv.page_size_tokens - 1) / kv.page_size_tokens - 1);
  for (const DequantizeTask& task : plan.dequantize) EXPECT_GE(task.source, first_prompt_page);
  for (const DequantizeTask& task : plan.band_dequantize) EXPECT_GE(task.source, first_prompt_page);
  EXPECT_FALSE(plan.band_dequantize.empty());
}

}  // namespace
}  // namespace oscar::cuda

#endif  // OSCAR_HAVE_CUDA
