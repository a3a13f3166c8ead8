#include "backend/cpu/cpu_kv_store.h"

#include <algorithm>
#include <cstring>

#include "quant/error_feedback.h"
#include "quant/group_codec.h"
#include "quant/published_quantizer.h"
#include "util/error.h"
#include "util/half.h"

namespace oscar {

CpuKvStore::CpuKvStore(const KvCacheConfig& config, const PageLayout& layout, int64_t num_layers,
                       KvPageCounts capacity)
    : config_(config), layout_(layout), capacity_(capacity) {
  if (config.has_band()) {
    band_config_ = config.band_config();
    band_layout_ = make_band_layout(config, layout.num_kv_heads, layout.head_dim);
  }
  for (int64_t layer = 0; layer < num_layers; ++layer) {
    full_arenas_.emplace_back(size_t(capacity.full * layout.full_page_bytes),
                              "KV cache: full-precision pages");
    quantized_arenas_.emplace_back(
        layout.bits > 0 ? size_t(capacity.quantized * layout.quantized_page_bytes) : 0,
        "KV cache: quantized pages");
    band_arenas_.emplace_back(size_t(capacity.band * layout.band_page_bytes),
                              "KV cache: band pages");
  }
}

size_t CpuKvStore::bytes_allocated() const {
  size_t total = 0;
  for (const auto* arenas : {&full_arenas_, &quantized_arenas_, &band_arenas_}) {
    for (const auto& arena : *arenas) total += arena.size();
  }
  return total;
}

std::byte* CpuKvStore::page(int64_t layer, const std::vector<LogicalPage>& pages, int64_t position,
                            PageKind kind) {
  return const_cast<std::byte*>(std::as_const(*this).page(layer, pages, position, kind));
}

const std::byte* CpuKvStore::page(int64_t layer, const std::vector<LogicalPage>& pages,
                                  int64_t position, PageKind kind) const {
  const int64_t logical = position / layout_.page_size_tokens;
  const LogicalPage* ids = logical < int64_t(pages.size()) ? &pages[size_t(logical)] : nullptr;
  switch (kind) {
    case PageKind::full:
      require(ids != nullptr && ids->full >= 0, "KV cache: position {} has no full-precision page",
              position);
      return full_arenas_[size_t(layer)].data() + ids->full * layout_.full_page_bytes;
    case PageKind::quantized:
      require(ids != nullptr && ids->quantized >= 0, "KV cache: position {} has no quantized page",
              position);
      return quantized_arenas_[size_t(layer)].data() +
             ids->quantized * layout_.quantized_page_bytes;
    case PageKind::band:
      require(ids != nullptr && ids->band >= 0, "KV cache: position {} has no band page", position);
      return band_arenas_[size_t(layer)].data() + ids->band * layout_.band_page_bytes;
  }
  fail("KV cache: unknown page kind");
}

void CpuKvStore::write_full(int64_t layer, const std::vector<LogicalPage>& pages, int64_t position,
                            const float* keys, const float* values) {
  std::byte* page = this->page(layer, pages, position, PageKind::full);
  const int64_t slot = position % layout_.page_size_tokens;
  const int64_t d = layout_.head_dim;
  for (int64_t h = 0; h < layout_.num_kv_heads; ++h) {
    std::byte* key_row = page + layout_.full_key_offset(h, slot);
    std::byte* value_row = page + layout_.full_value_offset(h, slot);
    if (layout_.element_bytes == 4) {
      std::memcpy(key_row, keys + h * d, size_t(d) * 4);
      std::memcpy(value_row, values + h * d, size_t(d) * 4);
      continue;
    }
    auto* key_out = reinterpret_cast<uint16_t*>(key_row);
    auto* value_out = reinterpret_cast<uint16_t*>(value_row);
    for (int64_t i = 0; i < d; ++i) {
      key_out[i] = float_to_bf16(keys[h * d + i]);
      value_out[i] = float_to_bf16(values[h * d + i]);
    }
  }
}

void CpuKvStore::load_full_row(const std::byte* source, float* out) const {
  if (layout_.element_bytes == 4) {
    std::memcpy(out, source, size_t(layout_.head_dim) * 4);
    return;
  }
  const auto* bits = reinterpret_cast<const uint16_t*>(source);
  for (int64_t i = 0; i < layout_.head_dim; ++i) out[i] = bf16_to_float(bits[i]);
}

void CpuKvStore::read_full(int64_t layer, const std::vector<LogicalPage>& pages, int64_t kv_head,
                           int64_t begin, int64_t end, float* keys_out, float* values_out) const {
  for (int64_t position = begin; position < end; ++position) {
    const std::byte* page = this->page(layer, pages, position, PageKind::full);
    const int64_t slot = position % layout_.page_size_tokens;
    const int64_t row = (position - begin) * layout_.head_dim;
    load_full_row(page + layout_.full_key_offset(kv_head, slot), keys_out + row);
    load_full_row(page + layout_.full_value_offset(kv_head, slot), values_out + row);
  }
}

void CpuKvStore::set_feedback(std::vector<float> key_factors, std::vector<float> value_factors) {
  const int64_t d = layout_.head_dim;
  for (const auto* factors : {&key_factors, &value_factors}) {
    require(factors->empty() || int64_t(factors->size()) == int64_t(quantized_arenas_.size()) *
                                                                layout_.num_kv_heads * d * d,
            "error feedback: {} factor values for {} layers x {} KV heads", factors->size(),
            quantized_arenas_.size(), layout_.num_kv_heads);
  }
  key_feedback_ = std::move(key_factors);
  value_feedback_ = std::move(value_factors);
}

void CpuKvStore::quantize_token_groups(std::byte* page, bool band, int64_t layer, int64_t kv_head,
                                       int64_t slot, const float* row, bool is_key) {
  const PageLayout& layout = band ? band_layout_ : layout_;
  const int bits = layout.bits;
  const int64_t g = layout.group_size;
  const int64_t d = layout.head_dim;
  const KvCacheConfig& format = band ? band_config_ : config_;
  ClipPolicy clip = is_key ? format.key_clip() : format.value_clip();
  auto* codes = reinterpret_cast<uint8_t*>(
      page + (is_key ? layout.key_codes(kv_head, slot) : layout.value_codes(kv_head, slot)));
  // The published clipping clamps the row first, then takes plain min/max per group.
  std::vector<float> clamped;
  if (format.clip_mode == ClipMode::row_quantile) {
    clamped.assign(row, row + d);
    clamp_row_at_quantile(clamped, clip.ratio);
    row = clamped.data();
    clip = ClipPolicy{};
  }
  std::vector<GroupParams> params(size_t(d / g));
  choose_row_params(std::span<const float>(row, size_t(d)), int(g), bits, clip, layout.param_format,
                    params);
  // With error feedback (or Lloyd-Max codes) the codes come from the values these leave in
  // `fed_back`; with feedback the parameters stay the nearest rounding's. The band rounds to
  // nearest.
  std::vector<float> fed_back;
  const std::vector<float>& feedback = is_key ? key_feedback_ : value_feedback_;
  if (format.lloyd_max) {
    fed_back.resize(size_t(d));
    lloyd_max_row(std::span<const float>(row, size_t(d)), layout.param_format, params, fed_back);
    row = fed_back.data();
  } else if (!band && !feedback.empty()) {
    fed_back.resize(size_t(d));
    const size_t factor = size_t((layer * layout_.num_kv_heads + kv_head) * d * d);
    round_with_feedback(std::span<const float>(row, size_t(d)), params, int(g), bits,
                        std::span<const float>(feedback).subspan(factor, size_t(d * d)), fed_back);
    row = fed_back.data();
  }
  for (int64_t group = 0; group < d / g; ++group) {
    quantize_group(std::span<const float>(row + group * g, size_t(g)), params[size_t(group)], bits,
                   codes + packed_bytes(int(group * g), bits));
    const int64_t params_offset = is_key ? layout.key_params(kv_head, slot, group)
                                         : layout.value_params(kv_head, slot, group);
    store_params(params[size_t(group)], layout.param_format,
                 reinterpret_cast<uint8_t*>(page + params_offset));
  }
}

void CpuKvStore::quantize(int64_t layer, const std::vector<LogicalPage>& pages, int64_t begin,
                          int64_t end, int64_t band_from) {
  if (begin >= end) return;
  std::vector<float> keys(size_t(layout_.head_dim));
  std::vector<float> values(size_t(layout_.head_dim));
  for (int64_t position = begin; position < end; ++position) {
    std::byte* target = page(layer, pages, position, PageKind::quantized);
    const bool banded = band_layout_.bits > 0 && position >= band_from;
    std::byte* band_target = banded ? page(layer, pages, position, PageKind::band) : nullptr;
    const int64_t slot = position % layout_.page_size_tokens;
    for (int64_t h = 0; h < layout_.num_kv_heads; ++h) {
      read_full(layer, pages, h, position, position + 1, keys.data(), values.data());
      if (!layout_.keys_per_channel)
        quantize_token_groups(target, /*band=*/false, layer, h, slot, keys.data(), true);
      quantize_token_groups(target, /*band=*/false, layer, h, slot, values.data(), false);
      if (banded) {
        quantize_token_groups(band_target, /*band=*/true, layer, h, slot, keys.data(), true);
        quantize_token_groups(band_target, /*band=*/true, layer, h, slot, values.data(), false);
      }
    }
  }
  if (layout_.keys_per_channel) quantize_key_channels(layer, pages, begin, end);
}

// KIVI keys: every channel of an aligned group of tokens shares one (scale, zero); the sink part
// of the first group stays full precision and is left out of the statistics.
void CpuKvStore::quantize_key_channels(int64_t layer, const std::vector<LogicalPage>& pages,
                                       int64_t begin, int64_t end) {
  const int64_t g = layout_.group_size;
  const int64_t d = layout_.head_dim;
  const int bits = layout_.bits;
  for (int64_t group_start = begin / g * g; group_start < end; group_start += g) {
    const int64_t first = std::max(group_start, begin);
    const int64_t last = std::min(group_start + g, end);
    const int64_t count = last - first;
    std::byte* target = page(layer, pages, first, PageKind::quantized);
    for (int64_t h = 0; h < layout_.num_kv_heads; ++h) {
      std::vector<float> keys(size_t(count * d)), unused(size_t(count * d));
      read_full(layer, pages, h, first, last, keys.data(), unused.data());
      std::vector<float> channel(static_cast<size_t>(count));
      for (int64_t c = 0; c < d; ++c) {
        for (int64_t t = 0; t < count; ++t) channel[size_t(t)] = keys[size_t(t * d + c)];
        const GroupParams params =
            choose_group_params(channel, bits, config_.key_clip(), layout_.param_format);
        const int64_t first_slot = first % layout_.page_size_tokens;
        store_params(params, layout_.param_format,
                     reinterpret_cast<uint8_t*>(target + layout_.key_params(h, first_slot, c)));
        for (int64_t t = 0; t < count; ++t) {
          auto* codes = reinterpret_cast<uint8_t*>(target + layout_.key_codes(h, first_slot + t));
          const float scaled = std::nearbyint((channel[size_t(t)] - params.zero) / params.scale);
          const int code = int(std::clamp(scaled, 0.0f, float((1 << bits) - 1)));
          const int64_t bit = c * bits;
          codes[bit / 8] =
              uint8_t((codes[bit / 8] & ~(((1 << bits) - 1) << (bit % 8))) | (code << (bit % 8)));
        }
      }
    }
  }
}

void CpuKvStore::read_quantized(int64_t layer, const std::vector<LogicalPage>& pages,
                                int64_t kv_head, int64_t begin, int64_t end, float* keys_out,
                                float* values_out) const {
  read_codes(layout_, PageKind::quantized, layer, pages, kv_head, begin, end, keys_out, values_out);
}

void CpuKvStore::read_band(int64_t layer, const std::vector<LogicalPage>& pages, int64_t kv_head,
                           int64_t begin, int64_t end, float* keys_out, float* values_out) const {
  read_codes(band_layout_, PageKind::band, layer, pages, kv_head, begin, end, keys_out, values_out);
}

void CpuKvStore::read_codes(const PageLayout& layout, PageKind kind, int64_t layer,
                            const std::vector<LogicalPage>& pages, int64_t kv_head, int64_t begin,
                            int64_t end, float* keys_out, float* values_out) const {
  const int64_t d = layout.head_dim;
  const int64_t g = layout.group_size;
  const int bits = layout.bits;
  for (int64_t position = begin; position < end; ++position) {
    const std::byte* page = this->page(layer, pages, position, kind);
    const int64_t slot = position % layout.page_size_tokens;
    float* key_row = keys_out + (position - begin) * d;
    float* value_row = values_out + (position - begin) * d;
    const auto* key_codes =
        reinterpret_cast<const uint8_t*>(page + layout.key_codes(kv_head, slot));
    const auto* value_codes =
        reinterpret_cast<const uint8_t*>(page + layout.value_codes(kv_head, slot));
    for (int64_t group = 0; group < d / g; ++group) {
      const auto params = load_params(
          reinterpret_cast<const uint8_t*>(page + layout.value_params(kv_head, slot, group)),
          layout.param_format);
      dequantize_group(value_codes, int(group * g), int(g), params, bits, value_row + group * g);
    }
    if (layout.keys_per_channel) {
      for (int64_t c = 0; c < d; ++c) {
        const auto params = load_params(
            reinterpret_cast<const uint8_t*>(page + layout.key_params(kv_head, slot, c)),
            layout.param_format);
        key_row[c] = float(code_at(key_codes, int(c), bits)) * params.scale + params.zero;
      }
      continue;
    }
    for (int64_t group = 0; group < d / g; ++group) {
      const auto params = load_params(
          reinterpret_cast<const uint8_t*>(page + layout.key_params(kv_head, slot, group)),
          layout.param_format);
      dequantize_group(key_codes, int(group * g), int(g), params, bits, key_row + group * g);
    }
  }
}

}  // namespace oscar
