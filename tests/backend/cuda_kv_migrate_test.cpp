// Migration of tokens out of the recent window on the GPU against the CPU store; skips without a
// GPU. Exact: the same codes and parameters, bit for bit.
#include <gtest/gtest.h>

#ifdef OSCAR_HAVE_CUDA

#include <algorithm>
#include <numeric>
#include <random>

#include "backend/cpu/cpu_kv_store.h"
#include "backend/cuda/device_step.h"
#include "backend/cuda/layer_kernels.h"
#include "backend/cuda/q8_scale_table.h"
#include "backend/cuda/step_plan.h"
#include "quant/error_feedback.h"
#include "quant/group_codec.h"
#include "support/cuda_test_support.h"

namespace oscar::cuda {
namespace {

struct MigrateCase {
  const char* name;
  KvDtype dtype;
  int group_size;
  ParamFormat param_format;
  bool clip_search;
  bool key_feedback;
  bool value_feedback;
  int64_t band_tokens = 0;  // > 0: the last band_tokens migrated tokens also get band copies
  // The published quantizer: rows clamped at the clip ratios' quantiles of their magnitudes, and
  // with lloyd_max the Lloyd-Max codes (quant/published_quantizer.h).
  ClipMode clip_mode = ClipMode::range_scale;
  bool lloyd_max = false;
};

// Every quantized value of positions [begin, end) of one layer, keys then values per head and
// position, dequantized on the host with group_codec from the quantized (or band) arena's bytes.
std::vector<float> dequantized_layer(const PageLayout& layout, const std::byte* arena,
                                     const std::vector<LogicalPage>& pages, bool band,
                                     int num_kv_heads, int64_t begin, int64_t end) {
  const int64_t d = layout.head_dim, g = layout.group_size;
  std::vector<float> out;
  std::vector<float> row(static_cast<size_t>(d));
  for (int h = 0; h < num_kv_heads; ++h) {
    for (int64_t p = begin; p < end; ++p) {
      const LogicalPage ids = pages[size_t(p / layout.page_size_tokens)];
      const auto* page = reinterpret_cast<const uint8_t*>(
          arena + (band ? ids.band : ids.quantized) * layout.quantized_page_bytes);
      const int64_t slot = p % layout.page_size_tokens;
      for (const bool key : {true, false}) {
        for (int64_t group = 0; group < d / g; ++group) {
          const uint8_t* params = page + (key ? layout.key_params(h, slot, group)
                                              : layout.value_params(h, slot, group));
          dequantize_group(page + (key ? layout.key_codes(h, slot) : layout.value_codes(h, slot)),
                           int(group * g), int(g), load_params(params, layout.param_format),
                           layout.bits, row.data() + group * g);
        }
        out.insert(out.end(), row.begin(), row.end());
      }
    }
  }
  return out;
}

class CudaKvMigrate : public CudaCases<MigrateCase> {};

// Two layers of random bf16 keys and values (channels of different magnitudes, as rotated keys
// have), written to the CPU store and to device pages at shuffled page ids; the tokens past the
// sink and before the recent window are quantized by CpuKvStore::quantize and by one migration
// launch for both layers (and with a band, the band's copies of the last ones by a second launch).
// The two must hold the same values, bit for bit.
TEST_P(CudaKvMigrate, WritesTheCpuStoresCodesAndParameters) {
  const MigrateCase m = GetParam();
  KvCacheConfig kv;
  kv.dtype = m.dtype;
  kv.method = KvMethod::quarot;  // rotated keys like oscar, without a rotations file; the factors
                                 // come below
  kv.group_size = m.group_size;
  kv.param_format = m.param_format;
  kv.clip_search = m.clip_search;
  kv.clip_mode = m.clip_mode;
  kv.lloyd_max = m.lloyd_max;
  // Used by the cases without the search: oscar's ratios, or the published quantiles.
  kv.clip_ratio_k = m.clip_mode == ClipMode::row_quantile ? 0.96f : kOscarKeyClip;
  kv.clip_ratio_v = m.clip_mode == ClipMode::row_quantile ? 0.92f : kOscarValueClip;
  kv.key_error_feedback = m.key_feedback;
  kv.value_error_feedback = m.value_feedback;
  kv.sink_tokens = 16;
  kv.recent_tokens = 32;
  kv.page_size_tokens = 32;
  kv.band_tokens = m.band_tokens;
  const int num_layers = 2, num_kv_heads = 2, d = 128;
  const int64_t tokens = 200, begin = kv.sink_tokens, end = tokens - kv.recent_tokens;
  const int64_t band_from = end - m.band_tokens;
  const PageLayout layout = make_page_layout(kv, num_kv_heads, d);
  const PageLayout band_layout =
      kv.has_band() ? make_band_layout(kv, num_kv_heads, d) : PageLayout{};
  const int64_t page_count = tokens / kv.page_size_tokens + 1;
  std::vector<int32_t> ids(static_cast<size_t>(page_count));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(5));
  std::vector<LogicalPage> pages;
  std::vector<PageIds> page_table;
  for (int64_t p = 0; p < page_count; ++p) {
    pages.push_back({ids[size_t(p)], ids[size_t(page_count - 1 - p)],
                     kv.has_band() ? ids[size_t((p + 3) % page_count)] : -1});
    page_table.push_back({pages.back().full, pages.back().quantized, pages.back().band});
  }
  CpuKvStore store(kv, layout, num_layers,
                   {page_count, page_count, kv.has_band() ? page_count : 0});
  // Factors of geometric spectra, a steeper one for keys than for values.
  std::vector<float> key_factors, value_factors;
  for (int i = 0; i < num_layers * num_kv_heads; ++i) {
    for (auto [factors, decay] : {std::pair{&key_factors, 0.93}, std::pair{&value_factors, 0.98}}) {
      std::vector<float> eigenvalues(static_cast<size_t>(d));
      for (int c = 0; c < d; ++c)
        eigenvalues[size_t(c)] = float((i + 1) * 50.0 * std::pow(decay, c));
      const std::vector<float> factor = key_feedback_factor(eigenvalues);
      factors->insert(factors->end(), factor.begin(), factor.end());
    }
  }
  store.set_feedback(m.key_feedback ? key_factors : std::vector<float>{},
                     m.value_feedback ? value_factors : std::vector<float>{});
  std::vector<uint16_t> full(size_t(num_layers * page_count * layout.full_page_bytes / 2));
  std::mt19937 generator(9);
  std::normal_distribution<float> normal;
  std::vector<float> keys(size_t(num_kv_heads * d)), values(keys.size());
  for (int layer = 0; layer < num_layers; ++layer) {
    for (int64_t p = 0; p < tokens; ++p) {
      const LogicalPage page = pages[size_t(p / kv.page_size_tokens)];
      const int64_t slot = p % kv.page_size_tokens;
      for (int h = 0; h < num_kv_heads; ++h) {
        for (int c = 0; c < d; ++c) {
          const float magnitude = 1.0f + 4.0f * float(c % 16 == 0);
          keys[size_t(h * d + c)] = round_to_bf16(magnitude * normal(generator));
          values[size_t(h * d + c)] = round_to_bf16(normal(generator));
          const int64_t base = (layer * page_count + page.full) * layout.full_page_bytes;
          full[size_t((base + layout.full_key_offset(h, slot)) / 2 + c)] =
              float_to_bf16(keys[size_t(h * d + c)]);
          full[size_t((base + layout.full_value_offset(h, slot)) / 2 + c)] =
              float_to_bf16(values[size_t(h * d + c)]);
        }
      }
      store.write_full(layer, pages, p, keys.data(), values.data());
    }
    store.quantize(layer, pages, begin, end, band_from);
  }
  std::vector<MigrateTask> tasks, band_tasks;
  for (int64_t p = begin; p < end; ++p) tasks.push_back({int32_t(p), 0});
  for (int64_t p = band_from; p < end; ++p) band_tasks.push_back({int32_t(p), 0});
  const StepCounts counts{0, 0, int32_t(tasks.size()), 0, int32_t(band_tasks.size())};
  const auto d_full = to_device(full);
  const auto d_page_table = to_device(page_table);
  const auto d_tasks = to_device(tasks);
  const auto d_band_tasks = to_device(band_tasks);
  const auto d_key_factors = to_device(key_factors);
  const auto d_value_factors = to_device(value_factors);
  const auto d_counts = to_device(std::vector<StepCounts>{counts});
  const DeviceBuffer<float> d_q8 = make_q8_scale_table();
  const int64_t quantized_layer_bytes = page_count * layout.quantized_page_bytes;
  DeviceBuffer<std::byte> quantized(size_t(num_layers * quantized_layer_bytes));
  KvMigrateArgs args;
  args.layout = layout;
  args.full_pages = reinterpret_cast<const std::byte*>(d_full.data());
  args.quantized_pages = quantized.data();
  args.num_layers = num_layers;
  args.full_layer_bytes = page_count * layout.full_page_bytes;
  args.quantized_layer_bytes = quantized_layer_bytes;
  args.page_table = d_page_table.data();
  args.tasks = d_tasks.data();
  args.counts = d_counts.data();
  args.num_kv_heads = num_kv_heads;
  args.clip_ratio_k = kv.clip_ratio_k;
  args.clip_ratio_v = kv.clip_ratio_v;
  args.clip_search = kv.clip_search;
  args.clip_mode = kv.clip_mode;
  args.lloyd_max = kv.lloyd_max;
  args.q8_scales = d_q8.data();
  args.key_feedback = m.key_feedback ? d_key_factors.data() : nullptr;
  args.value_feedback = m.value_feedback ? d_value_factors.data() : nullptr;
  auto migrate = [&] {
    check(cudaMemset(quantized.data(), 0, quantized.bytes()), "memset");
    launch_kv_migrate(args, int64_t(tasks.size()), 0, nullptr);
    return to_host(quantized, quantized.size());
  };
  const std::vector<std::byte> arena = migrate();
  // The arena's values of positions [from, end) against the CPU store's.
  auto mismatches_in = [&](const PageLayout& l, const std::vector<std::byte>& bytes,
                           int64_t layer_bytes, bool band, int64_t from, int64_t& compared) {
    std::vector<float> cpu_keys(size_t((end - from) * d)), cpu_values(cpu_keys.size());
    int64_t mismatches = 0;
    for (int layer = 0; layer < num_layers; ++layer) {
      const std::vector<float> gpu = dequantized_layer(l, bytes.data() + layer * layer_bytes, pages,
                                                       band, num_kv_heads, from, end);
      for (int h = 0; h < num_kv_heads; ++h) {
        if (band) {
          store.read_band(layer, pages, h, from, end, cpu_keys.data(), cpu_values.data());
        } else {
          store.read_quantized(layer, pages, h, from, end, cpu_keys.data(), cpu_values.data());
        }
        for (int64_t p = 0; p < end - from; ++p) {
          for (int c = 0; c < d; ++c, compared += 2) {
            const size_t row = size_t(((h * (end - from) + p) * 2) * d + c);
            mismatches += gpu[row] != cpu_keys[size_t(p * d + c)];
            mismatches += gpu[row + size_t(d)] != cpu_values[size_t(p * d + c)];
          }
        }
      }
    }
    return mismatches;
  };
  int64_t compared = 0;
  const int64_t mismatches =
      mismatches_in(layout, arena, quantized_layer_bytes, false, begin, compared);
  std::printf("[ %s ] %lld of %lld values differ from the CPU store\n", m.name,
              static_cast<long long>(mismatches), static_cast<long long>(compared));
  EXPECT_EQ(mismatches, 0);
  if (kv.has_band()) {
    const int64_t band_layer_bytes = page_count * band_layout.quantized_page_bytes;
    DeviceBuffer<std::byte> band(size_t(num_layers * band_layer_bytes));
    check(cudaMemset(band.data(), 0, band.bytes()), "memset");
    KvMigrateArgs band_args;
    band_args.layout = band_layout;
    band_args.band = true;
    band_args.full_pages = args.full_pages;
    band_args.quantized_pages = band.data();
    band_args.num_layers = num_layers;
    band_args.full_layer_bytes = args.full_layer_bytes;
    band_args.quantized_layer_bytes = band_layer_bytes;
    band_args.page_table = args.page_table;
    band_args.tasks = d_band_tasks.data();
    band_args.counts = args.counts;
    band_args.num_kv_heads = num_kv_heads;
    band_args.q8_scales = args.q8_scales;
    launch_kv_migrate(band_args, int64_t(band_tasks.size()), 0, nullptr);
    int64_t band_compared = 0;
    const int64_t band_mismatches = mismatches_in(band_layout, to_host(band, band.size()),
                                                  band_layer_bytes, true, band_from, band_compared);
    std::printf("[ %s ] band: %lld of %lld values differ from the CPU store\n", m.name,
                static_cast<long long>(band_mismatches), static_cast<long long>(band_compared));
    EXPECT_EQ(band_compared, 2 * num_layers * num_kv_heads * m.band_tokens * d);
    EXPECT_EQ(band_mismatches, 0);
  }
  if (m.key_feedback ||
      m.value_feedback) {  // feedback changed codes: the comparison was not of nearest rounding
    args.key_feedback = nullptr;
    args.value_feedback = nullptr;
    const std::vector<std::byte> nearest = migrate();
    EXPECT_NE(std::memcmp(nearest.data(), arena.data(), arena.size()), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Formats, CudaKvMigrate,
    ::testing::Values(
        MigrateCase{"int2_g128_q8_clip_feedback", KvDtype::int2, 128, ParamFormat::q8, false, true,
                    true},  // OSCAR's defaults
        MigrateCase{"int2_g128_q8_clip_feedback_band", KvDtype::int2, 128, ParamFormat::q8, false,
                    true, true, 100},
        MigrateCase{"int2_g128_q8_search_feedback", KvDtype::int2, 128, ParamFormat::q8, true, true,
                    true},
        MigrateCase{"int2_g64_q8_search_feedback", KvDtype::int2, 64, ParamFormat::q8, true, true,
                    true},
        MigrateCase{"int2_g128_q8_search_value_feedback", KvDtype::int2, 128, ParamFormat::q8, true,
                    false, true},
        MigrateCase{"int2_g128_q8_search", KvDtype::int2, 128, ParamFormat::q8, true, false, false},
        MigrateCase{"int2_g64_f16_clip", KvDtype::int2, 64, ParamFormat::f16, false, false, false},
        MigrateCase{"int4_g32_bf16_key_feedback", KvDtype::int4, 32, ParamFormat::bf16, false, true,
                    false},
        // The published quantizer: its clipping with every parameter format, nearest and with
        // error feedback, and its Lloyd-Max codes.
        MigrateCase{"int2_g128_f32_rowquantile", KvDtype::int2, 128, ParamFormat::f32, false, false,
                    false, 0, ClipMode::row_quantile},  // --kv-preset oscar-published
        MigrateCase{"int2_g128_f32_rowquantile_feedback", KvDtype::int2, 128, ParamFormat::f32,
                    false, true, true, 0, ClipMode::row_quantile},
        MigrateCase{"int2_g128_f16_rowquantile_band", KvDtype::int2, 128, ParamFormat::f16, false,
                    false, false, 100, ClipMode::row_quantile},
        MigrateCase{"int2_g64_q8_rowquantile_feedback", KvDtype::int2, 64, ParamFormat::q8, false,
                    true, true, 0, ClipMode::row_quantile},
        MigrateCase{"int2_g32_bf16_rowquantile", KvDtype::int2, 32, ParamFormat::bf16, false, false,
                    false, 0, ClipMode::row_quantile},
        MigrateCase{"int4_g32_f32_rowquantile_key_feedback", KvDtype::int4, 32, ParamFormat::f32,
                    false, true, false, 0, ClipMode::row_quantile},
        MigrateCase{"int2_g128_f32_lloydmax", KvDtype::int2, 128, ParamFormat::f32, false, false,
                    false, 0, ClipMode::row_quantile, true},
        MigrateCase{"int2_g64_f16_lloydmax", KvDtype::int2, 64, ParamFormat::f16, false, false,
                    false, 0, ClipMode::row_quantile, true},
        MigrateCase{"int2_g128_q8_lloydmax", KvDtype::int2, 128, ParamFormat::q8, false, false,
                    false, 0, ClipMode::row_quantile, true},
        MigrateCase{"int2_g32_bf16_lloydmax_band", KvDtype::int2, 32, ParamFormat::bf16, false,
                    false, false, 100, ClipMode::row_quantile, true}),
    case_name<MigrateCase>);

}  // namespace
}  // namespace oscar::cuda

#endif  // OSCAR_HAVE_CUDA
