// The attention kernels (paged split-K decode attention and its combine, prefill attention) against
// a float64 softmax over the pages' dequantized values (group_codec.h on the host); skips without a
// GPU. Tolerances, as ||gpu - ref|| / ||ref||: bf16 pages 2e-3; INT2/INT4 pages 5e-3 (the f16
// P * scale operand); the tensor-core prefill kernel at least 3e-3 (bf16 queries and weights, as in
// FlashAttention: 2.2e-3 the most measured on bf16 pages).
#include <gtest/gtest.h>

#ifdef OSCAR_HAVE_CUDA

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "backend/cuda/attention_combine.h"
#include "backend/cuda/decode_attention.h"
#include "backend/cuda/device_step.h"
#include "backend/cuda/float_block_attention.h"
#include "backend/cuda/kv_noise.h"
#include "backend/cuda/page_tensor_map.h"
#include "backend/cuda/prefill_attention.h"
#include "backend/cuda/q8_scale_table.h"
#include "backend/cuda/query_rotation_tiles.h"
#include "backend/cuda/step_plan.h"
#include "quant/group_codec.h"
#include "support/cuda_test_support.h"

namespace oscar::cuda {
namespace {

struct AttentionCase {
  const char* name;
  KvDtype dtype;
  int group_size;
  ParamFormat param_format;
  int query_group;  // query heads per KV head
  double tolerance;
  int64_t sink_tokens = 64;
  int page_size_tokens =
      64;  // super-tiles are 64 (INT2) or 32 (INT4) tokens: other sizes put one across pages
  int64_t band_tokens = 0;
};

// The page arenas of the decode attention test, downloaded.
struct HostArenas {
  std::vector<std::byte> full, quantized, band;
};

// Reference: float64 softmax(q . k / sqrt(D)) v over the page bytes, dequantized by group_codec.
std::vector<double> reference_attention(const PageLayout& layout, const PageLayout& band_layout,
                                        const KvCacheConfig& kv, const HostArenas& arenas,
                                        const std::vector<LogicalPage>& pages, int64_t t,
                                        const float* queries, int num_kv_heads, int group) {
  const int64_t d = layout.head_dim;
  const int64_t boundary = quantized_end(kv, t + 1), band_start = band_begin(kv, t + 1);
  std::vector<double> out(size_t(num_kv_heads * group * d), 0.0);
  std::vector<float> key(static_cast<size_t>(d)), value(static_cast<size_t>(d));
  for (int h = 0; h < num_kv_heads; ++h) {
    std::vector<std::vector<float>> keys, values;
    for (int64_t j = 0; j <= t; ++j) {
      const LogicalPage page = pages[size_t(j / layout.page_size_tokens)];
      const int64_t slot = j % layout.page_size_tokens;
      if (j >= kv.sink_tokens && j < boundary) {
        const bool banded = j >= band_start;
        const PageLayout& l = banded ? band_layout : layout;
        const auto* base = reinterpret_cast<const uint8_t*>(
            banded ? arenas.band.data() + page.band * l.quantized_page_bytes
                   : arenas.quantized.data() + page.quantized * l.quantized_page_bytes);
        for (int64_t g = 0; g < d / l.group_size; ++g) {
          dequantize_group(base + l.key_codes(h, slot), int(g * l.group_size), int(l.group_size),
                           load_params(base + l.key_params(h, slot, g), l.param_format), l.bits,
                           key.data() + g * l.group_size);
          dequantize_group(base + l.value_codes(h, slot), int(g * l.group_size), int(l.group_size),
                           load_params(base + l.value_params(h, slot, g), l.param_format), l.bits,
                           value.data() + g * l.group_size);
        }
      } else {
        const std::byte* base = arenas.full.data() + page.full * layout.full_page_bytes;
        for (int64_t c = 0; c < d; ++c) {
          key[size_t(c)] = bf16_to_float(
              reinterpret_cast<const uint16_t*>(base + layout.full_key_offset(h, slot))[c]);
          value[size_t(c)] = bf16_to_float(
              reinterpret_cast<const uint16_t*>(base + layout.full_value_offset(h, slot))[c]);
        }
      }
      keys.push_back(key);
      values.push_back(value);
    }
    for (int q = 0; q < group; ++q) {
      const float* query = queries + (h * group + q) * d;
      std::vector<double> scores(keys.size());
      for (size_t j = 0; j < keys.size(); ++j) {
        double dot = 0;
        for (int64_t c = 0; c < d; ++c) dot += double(query[c]) * keys[j][size_t(c)];
        scores[j] = dot / std::sqrt(double(d));
      }
      const double top = *std::max_element(scores.begin(), scores.end());
      double total = 0;
      for (double& s : scores) total += (s = std::exp(s - top));
      double* o = &out[size_t((h * group + q) * d)];
      for (size_t j = 0; j < keys.size(); ++j)
        for (int64_t c = 0; c < d; ++c) o[c] += scores[j] / total * values[j][size_t(c)];
    }
  }
  return out;
}

// Rewrites the key of every position [0, last] of a sequence, in each of its storages (bf16,
// quantized, band), as the constant vector z * (1, ..., 1) with z rising linearly from 0 at
// position 0 to `top` at `last`: quantized keys as all-zero codes under a group zero point of z.
void write_rising_keys(const KvCacheConfig& kv, const PageLayout& layout,
                       const PageLayout& band_layout, HostArenas& arenas,
                       const std::vector<LogicalPage>& pages, int64_t last, int num_kv_heads,
                       float top) {
  const int64_t d = layout.head_dim;
  for (int64_t j = 0; j <= last; ++j) {
    const float z = top * float(j) / float(last);
    const LogicalPage page = pages[size_t(j / layout.page_size_tokens)];
    const int64_t slot = j % layout.page_size_tokens;
    for (int h = 0; h < num_kv_heads; ++h) {
      auto* full =
          reinterpret_cast<uint16_t*>(arenas.full.data() + page.full * layout.full_page_bytes +
                                      layout.full_key_offset(h, slot));
      for (int64_t c = 0; c < d; ++c) full[c] = float_to_bf16(z);
      for (const bool banded : {false, true}) {
        if (banded ? !kv.has_band() : layout.bits == 0) continue;
        const PageLayout& l = banded ? band_layout : layout;
        auto* base = reinterpret_cast<uint8_t*>(
            banded ? arenas.band.data() + page.band * l.quantized_page_bytes
                   : arenas.quantized.data() + page.quantized * l.quantized_page_bytes);
        std::memset(base + l.key_codes(h, slot), 0, size_t(d * l.bits / 8));
        for (int64_t g = 0; g < d / l.group_size; ++g) {
          store_params(params_for_range(z, z, l.bits, l.param_format), l.param_format,
                       base + l.key_params(h, slot, g));
        }
      }
    }
  }
}

// Which kernel a test runs: the split-K decode kernel (single-token steps), the tensor-core
// prefill kernel over dequantized scratch pages, or the float kernel reading every format in place.
enum class Kernel { decode, tensor_core_prefill, float_block };

// Sequences of `cached[s]` tokens, each with a step of `step_tokens[s]` query rows (1: a decode
// row), every page present in every format at shuffled page ids, random page bytes and queries; the
// step's attention through `kernel` (decode: on `decode_grid` blocks, 0: as many as the GPU holds
// at once; in splits of `split_tokens` positions, 0: the plan's), then the combine, each query row
// against float64. `score_rise` > 0: the keys rewritten by write_rising_keys and the queries
// shifted by +1 (channel sums near +128), so that every head's scores rise by about that much
// (natural log units) from the first position to the last.
void expect_attention_matches_reference(const AttentionCase& a, const std::vector<int64_t>& cached,
                                        const std::vector<int64_t>& step_tokens, Kernel kernel,
                                        int decode_grid = 0, int64_t split_tokens = 0,
                                        double score_rise = 0.0, bool rotate_queries = false) {
  const bool prefill = kernel != Kernel::decode;
  const double tolerance =
      kernel == Kernel::tensor_core_prefill ? std::max(a.tolerance, 3e-3) : a.tolerance;
  KvCacheConfig kv;
  kv.dtype = a.dtype;
  kv.group_size = a.group_size;
  kv.param_format = a.param_format;
  kv.sink_tokens = a.sink_tokens;
  kv.recent_tokens = 256;
  kv.page_size_tokens = a.page_size_tokens;
  kv.band_tokens = a.band_tokens;
  const int num_kv_heads = 2, d = 128;
  const PageLayout layout = make_page_layout(kv, num_kv_heads, d);
  const PageLayout band_layout =
      kv.has_band() ? make_band_layout(kv, num_kv_heads, d) : PageLayout{};
  // Each sequence's pages cover its last query row's position.
  std::vector<int64_t> last_position(cached.size());
  int64_t page_count = 0, row_count = 0;
  for (size_t s = 0; s < cached.size(); ++s) {
    last_position[s] = cached[s] + step_tokens[s] - 1;
    page_count += last_position[s] / kv.page_size_tokens + 1;
    row_count += step_tokens[s];
  }
  DeviceBuffer<std::byte> full(size_t(page_count * layout.full_page_bytes));
  DeviceBuffer<std::byte> quantized(
      size_t(std::max<int64_t>(1, page_count * layout.quantized_page_bytes)));
  DeviceBuffer<std::byte> band(
      size_t(std::max<int64_t>(1, page_count * band_layout.quantized_page_bytes)));
  launch_fill_kv_noise(layout, full.data(), page_count,
                       layout.bits > 0 ? quantized.data() : nullptr, page_count, 11, nullptr);
  if (kv.has_band())
    launch_fill_kv_noise(band_layout, nullptr, 0, band.data(), page_count, 13, nullptr);
  std::vector<int32_t> band_ids(static_cast<size_t>(page_count));
  std::iota(band_ids.begin(), band_ids.end(), 0);
  std::shuffle(band_ids.begin(), band_ids.end(), std::mt19937(4));
  std::vector<int32_t> ids(static_cast<size_t>(page_count));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(3));
  std::vector<SequencePages> sequences(cached.size());
  std::vector<std::vector<LogicalPage>> tables(cached.size());
  std::vector<int32_t> tokens(size_t(row_count), 1);
  std::vector<SequenceStep> steps;
  size_t next_id = 0;
  for (size_t s = 0; s < cached.size(); ++s) {
    for (int64_t p = 0; p <= last_position[s] / kv.page_size_tokens; ++p, ++next_id) {
      tables[s].push_back({ids[next_id],
                           layout.bits > 0 ? ids[page_count - 1 - int64_t(next_id)] : -1,
                           kv.has_band() ? band_ids[next_id] : -1});
    }
    sequences[s].attach_prefix(tables[s], cached[s]);
  }
  HostArenas arenas{to_host(full, full.size()), to_host(quantized, quantized.size()),
                    to_host(band, band.size())};
  if (score_rise > 0) {
    const float top =
        float(score_rise * std::sqrt(double(d)) / d);  // a query's channels sum to about d
    for (size_t s = 0; s < cached.size(); ++s) {
      write_rising_keys(kv, layout, band_layout, arenas, tables[s], last_position[s], num_kv_heads,
                        top);
    }
    upload(arenas.full, full);
    upload(arenas.quantized, quantized);
    upload(arenas.band, band);
  }
  int64_t first_token = 0;
  for (size_t s = 0; s < cached.size(); ++s) {
    steps.push_back(
        {std::span(&tokens[size_t(first_token)], size_t(step_tokens[s])), &sequences[s], false});
    first_token += step_tokens[s];
  }
  StepPlanShape shape{num_kv_heads, a.query_group, kernel == Kernel::decode,
                      decode_attention_resident_blocks(layout)};
  shape.tensor_core_prefill = kernel == Kernel::tensor_core_prefill;
  // A bf16 cache's splits are multiples of 64 (step_plan.h); at these contexts the rule picks 256,
  // so take 320: pieces that start and end off the 256 grid.
  if (!kv.quantized()) shape.split_tokens = 5 * kFullDecodeSplitAlignment;
  if (split_tokens > 0) shape.split_tokens = split_tokens;
  if (!prefill) {
    ASSERT_TRUE(decode_attention_supports(layout, a.query_group));
  }
  StepPlan plan;
  make_step_plan(steps, kv, shape, plan);
  ASSERT_EQ(plan.decode_items.empty(), prefill);
  if (decode_grid > 0) {
    ASSERT_GT(int64_t(plan.decode_items.size()) * num_kv_heads, 3 * decode_grid);
  }
  ASSERT_EQ(plan.block_items.empty(), !prefill);
  DeviceStep device_step;
  device_step.upload(plan, nullptr);
  const int64_t q_width = int64_t(num_kv_heads) * a.query_group * d;
  const auto queries = random_floats(size_t(row_count * q_width), 12, score_rise > 0 ? -1.f : -2.f,
                                     score_rise > 0 ? 3.f : 2.f);
  const auto d_queries = to_device(queries);
  // With `rotate_queries` the tensor-core kernel gets the queries as they are and a matrix R per KV
  // head (query_rotation_tiles.h); the reference gets q R, formed in float64.
  std::vector<float> rotated = queries;
  const auto rotation = random_floats(size_t(num_kv_heads * d * d), 13, -0.15f, 0.15f);
  if (rotate_queries) {
    for (int64_t v = 0; v < int64_t(queries.size()) / d; ++v) {
      const int kv_head = int(v % (num_kv_heads * a.query_group) / a.query_group);
      for (int64_t n = 0; n < d; ++n) {
        double sum = 0.0;
        for (int64_t k = 0; k < d; ++k)
          sum += double(queries[size_t(v * d + k)]) * rotation[size_t((kv_head * d + k) * d + n)];
        rotated[size_t(v * d + n)] = float(sum);
      }
    }
  }
  const auto d_rotation_tiles = to_device(query_rotation_tiles(rotation, d));
  DeviceBuffer<float> partials(
      size_t(plan.partial_records * partial_record_floats(a.query_group, d)));
  const DeviceBuffer<float> d_q8 = make_q8_scale_table();
  AttentionArgs args;
  args.layout = layout;
  args.sink_tokens = kv.sink_tokens;
  args.full_pages = full.data();
  args.quantized_pages = layout.bits > 0 ? quantized.data() : nullptr;
  args.band_layout = band_layout;
  args.band_pages = kv.has_band() ? band.data() : nullptr;
  device_step.fill_attention_args(args);
  args.queries = d_queries.data();
  args.partials = partials.data();
  args.num_kv_heads = num_kv_heads;
  args.group = a.query_group;
  args.score_scale = attention_score_scale(d);
  args.q8_scales = d_q8.data();
  DeviceBuffer<std::byte> scratch(
      size_t(std::max<int64_t>(1, plan.scratch_pages()) * layout.full_page_bytes));
  DeviceBuffer<__nv_bfloat16> out(size_t(row_count * q_width));
  DeviceBuffer<float> out_float(out.size());
  args.output = out.data();
  args.output_float = out_float.data();
  if (kernel == Kernel::tensor_core_prefill) {
    ASSERT_EQ(plan.scratch_pages() > 0,
              kv.quantized() && int64_t(*std::max_element(cached.begin(), cached.end())) >
                                    kv.sink_tokens + kv.recent_tokens);
    launch_kv_dequantize(layout, args.quantized_pages, device_step.dequantize(),
                         int64_t(plan.dequantize.size()), args.q8_scales, scratch.data(), nullptr);
    launch_kv_dequantize(band_layout, args.band_pages, device_step.band_dequantize(),
                         int64_t(plan.band_dequantize.size()), args.q8_scales, scratch.data(),
                         nullptr);
    args.scratch_pages = scratch.data();
    if (rotate_queries) {
      args.queries = nullptr;
      args.prefill_queries = d_queries.data();
      args.prefill_query_stride = q_width;
      args.query_rotation_tiles = reinterpret_cast<const __nv_bfloat16*>(d_rotation_tiles.data());
    }
    launch_prefill_attention(
        args, int64_t(plan.block_items.size()),
        make_page_tensor_map(full.data(), page_count, layout),
        make_page_tensor_map(scratch.data(), std::max<int64_t>(1, plan.scratch_pages()), layout),
        nullptr);
  } else if (kernel == Kernel::float_block) {
    launch_float_block_attention(args, float_block_attention_resident_blocks(), nullptr);
  } else {
    launch_decode_attention(
        args, decode_grid > 0 ? decode_grid : decode_attention_resident_blocks(layout), nullptr);
  }
  launch_attention_combine(device_step.combine(), row_count, plan.max_splits(), partials.data(),
                           num_kv_heads, a.query_group, d, out.data(), out_float.data(), nullptr);
  const auto actual = to_host(out_float, out_float.size());
  int64_t row = 0;
  for (size_t s = 0; s < cached.size(); ++s) {
    double worst = 0.0;
    for (int64_t t = cached[s]; t <= last_position[s]; ++t, ++row) {
      const auto expected =
          reference_attention(layout, band_layout, kv, arenas, tables[s], t,
                              rotated.data() + row * q_width, num_kv_heads, a.query_group);
      const std::vector<float> got(actual.begin() + ptrdiff_t(row * q_width),
                                   actual.begin() + ptrdiff_t((row + 1) * q_width));
      const double error = relative_error(expected, got);
      worst = std::max(worst, error);
      EXPECT_LE(error, tolerance) << "sequence " << s << ", position " << t;
    }
    std::printf("[ %s ] context %lld, %lld rows: largest relative error %.2e\n", a.name,
                static_cast<long long>(cached[s] + 1), static_cast<long long>(step_tokens[s]),
                worst);
  }
}

class CudaDecodeAttention : public CudaCases<AttentionCase> {};

// Three sequences at contexts that give one, a few and many splits.
TEST_P(CudaDecodeAttention, MatchesFloat64Reference) {
  expect_attention_matches_reference(GetParam(), {37, 700, 9001}, {1, 1, 1}, Kernel::decode);
}

// A launch of fewer blocks than (item, KV head) units: most units are claimed from the device
// counter after the first wave, and the counter is reset for the next launch (the test's second
// launch runs the same plan through the same blocks).
TEST_P(CudaDecodeAttention, FewerBlocksThanUnitsMatchFloat64Reference) {
  for (int launch = 0; launch < 2; ++launch) {
    expect_attention_matches_reference(GetParam(), {700, 9001}, {1, 1}, Kernel::decode,
                                       /*decode_grid=*/7);
  }
}

// Splits of the plan's longest length (kLongerDecodeSplits, for launches of many waves): a row cut
// into two of them and a rest.
TEST_P(CudaDecodeAttention, LongSplitsMatchFloat64Reference) {
  expect_attention_matches_reference(GetParam(), {20000}, {1}, Kernel::decode, /*decode_grid=*/0,
                                     /*split_tokens=*/kLongerDecodeSplits[0]);
}

// Scores that rise by 30 (natural log units) along a row, in splits of 4096 positions (the plan
// would cut this one row into pieces of 256, a single INT2 super-tile per warp): each warp takes
// every fourth tile of a piece, over which its scores rise by about 20 (log2 units), so the running
// max is raised several times inside its share, each time past the kernel's slack of 4, with
// weights up to 2^4 between raises; the rescales of what was accumulated are checked against
// float64.
TEST_P(CudaDecodeAttention, RisingScoresMatchFloat64Reference) {
  expect_attention_matches_reference(GetParam(), {9001}, {1}, Kernel::decode, /*decode_grid=*/0,
                                     /*split_tokens=*/kLongestDecodeSplit, /*score_rise=*/30.0);
}

INSTANTIATE_TEST_SUITE_P(
    Formats, CudaDecodeAttention,
    ::testing::Values(
        AttentionCase{"bf16_gqa4", KvDtype::bf16, 128, ParamFormat::f16, 4, 2e-3},
        AttentionCase{"bf16_gqa8", KvDtype::bf16, 128, ParamFormat::f16, 8, 2e-3},
        AttentionCase{"int2_g128_f16_gqa4", KvDtype::int2, 128, ParamFormat::f16, 4, 5e-3},
        AttentionCase{"int2_g64_bf16_gqa1", KvDtype::int2, 64, ParamFormat::bf16, 1, 5e-3},
        AttentionCase{"int2_g64_q8_gqa4", KvDtype::int2, 64, ParamFormat::q8, 4, 5e-3},
        AttentionCase{"int2_g32_q8_gqa8", KvDtype::int2, 32, ParamFormat::q8, 8, 5e-3},
        AttentionCase{"int2_g128_q8_gqa8", KvDtype::int2, 128, ParamFormat::q8, 8, 5e-3},
        AttentionCase{"int2_g128_q8_gqa4_sink4_page48", KvDtype::int2, 128, ParamFormat::q8, 4,
                      5e-3, 4, 48},
        AttentionCase{"int2_g64_f16_gqa4_sink40_page16", KvDtype::int2, 64, ParamFormat::f16, 4,
                      5e-3, 40, 16},
        AttentionCase{"int4_g128_f16_gqa4", KvDtype::int4, 128, ParamFormat::f16, 4, 5e-3},
        AttentionCase{"int4_g64_q8_gqa8", KvDtype::int4, 64, ParamFormat::q8, 8, 5e-3},
        AttentionCase{"int4_g128_bf16_gqa4_sink40_page16", KvDtype::int4, 128, ParamFormat::bf16, 4,
                      5e-3, 40, 16},
        AttentionCase{"int4_g32_f16_gqa4", KvDtype::int4, 32, ParamFormat::f16, 4, 5e-3},
        // The band's INT4 items beside the INT2 super-tile path (whole pages, pages
        // across super-tiles) and the word-load path.
        AttentionCase{"int2_g128_q8_gqa8_band300", KvDtype::int2, 128, ParamFormat::q8, 8, 5e-3, 64,
                      64, 300},
        AttentionCase{"int2_g64_bf16_gqa4_band500", KvDtype::int2, 64, ParamFormat::bf16, 4, 5e-3,
                      64, 64, 500},
        AttentionCase{"int2_g128_f16_gqa1_sink4_page48_band200", KvDtype::int2, 128,
                      ParamFormat::f16, 1, 5e-3, 4, 48, 200},
        AttentionCase{"int2_g64_q8_gqa4_sink40_page16_band100", KvDtype::int2, 64, ParamFormat::q8,
                      4, 5e-3, 40, 16, 100},
        AttentionCase{"int2_g32_f16_gqa4_band768", KvDtype::int2, 32, ParamFormat::f16, 4, 5e-3, 64,
                      64, 768}),
    case_name<AttentionCase>);

class CudaPrefillAttention : public CudaCases<AttentionCase> {};

// Prefill chunks over a cached prefix (chunked prefill, prefix-cache hits): a chunk whose rows all
// read full precision, one whose rows cross the recent window's and the band's boundaries at
// different positions, and one of a block item and a part over a long prefix; on the tensor cores
// and on the float kernel (which KIVI's keys take).
TEST_P(CudaPrefillAttention, MatchesFloat64Reference) {
  expect_attention_matches_reference(GetParam(), {37, 700, 3000}, {20, 130, 23},
                                     Kernel::tensor_core_prefill);
  expect_attention_matches_reference(GetParam(), {37, 700, 3000}, {20, 130, 23},
                                     Kernel::float_block);
}

// A long chunk on the tensor cores: hundreds of rows, so that many block items of 128 rows each
// read tiles of 128 keys in every format, from the sink through the 2-bit keys and the band to
// the window and the chunk's own keys, the last items from the first row's boundaries to the
// last's.
TEST_P(CudaPrefillAttention, LongChunkOnTensorCoresMatchesFloat64Reference) {
  expect_attention_matches_reference(GetParam(), {1400}, {700}, Kernel::tensor_core_prefill);
}

// Queries as the q|k|v rows hold them, rotated by the tensor-core kernel (R_K in bf16 high and low
// parts, query_rotation_tiles.h): the chunks of both tests above against q R_K in float64.
TEST_P(CudaPrefillAttention, RotatedQueriesOnTensorCoresMatchFloat64Reference) {
  expect_attention_matches_reference(GetParam(), {37, 700, 3000}, {20, 130, 23},
                                     Kernel::tensor_core_prefill, 0, 0, 0.0,
                                     /*rotate_queries=*/true);
  expect_attention_matches_reference(GetParam(), {1400}, {700}, Kernel::tensor_core_prefill, 0, 0,
                                     0.0, /*rotate_queries=*/true);
}

INSTANTIATE_TEST_SUITE_P(
    Formats, CudaPrefillAttention,
    ::testing::Values(
        AttentionCase{"bf16_gqa4", KvDtype::bf16, 128, ParamFormat::f16, 4, 2e-3},
        AttentionCase{"bf16_gqa8", KvDtype::bf16, 128, ParamFormat::f16, 8, 2e-3},
        AttentionCase{"int2_g128_q8_gqa8", KvDtype::int2, 128, ParamFormat::q8, 8, 5e-3},
        AttentionCase{"int2_g128_q8_gqa4_band768", KvDtype::int2, 128, ParamFormat::q8, 4, 5e-3, 64,
                      64, 768},
        AttentionCase{"int2_g64_bf16_gqa4_sink40_page48", KvDtype::int2, 64, ParamFormat::bf16, 4,
                      5e-3, 40, 48},
        AttentionCase{"int4_g32_f16_gqa2", KvDtype::int4, 32, ParamFormat::f16, 2, 5e-3},
        AttentionCase{"int2_g128_q8_gqa8_band300", KvDtype::int2, 128, ParamFormat::q8, 8, 5e-3, 64,
                      64, 300},
        AttentionCase{"int2_g64_f16_gqa4_sink4_page16_band100", KvDtype::int2, 64, ParamFormat::f16,
                      4, 5e-3, 4, 16, 100}),
    case_name<AttentionCase>);

}  // namespace
}  // namespace oscar::cuda

#endif  // OSCAR_HAVE_CUDA
