#include "backend/cpu/cpu_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/simd.h"
#include "util/parallel.h"

namespace oscar {
namespace {

constexpr int64_t kQueryBlock = 16;  // query tokens per task

// One KV head's readable rows for a chunk, as float: keys transposed ([head_dim][padded rows], so
// sixteen keys' scores are one vector fma chain over head_dim), values row-major.
struct Rows {
  int64_t first_position = 0;  // position of row 0
  int64_t count = 0;
  int64_t padded = 0;  // row capacity, a multiple of 16 (padding keys are zero)
  std::vector<float> keys_transposed;
  std::vector<float> values;
};

// Full-precision rows cover [0, sink_rows) and [window_start, end), stored contiguously; the
// quantized rows cover [sink, quantized_stop), 2-bit ones up to int2_stop and 4-bit band copies
// from band_start on.
struct GatheredHead {
  Rows sink;
  Rows window;
  Rows quantized;
  Rows band;
};

template <typename Reader>
Rows gather_rows(int64_t begin, int64_t end, int64_t head_dim, Reader read) {
  Rows rows;
  rows.first_position = begin;
  rows.count = std::max<int64_t>(0, end - begin);
  rows.padded = (rows.count + 15) / 16 * 16 + 16;  // +16: a vector may start at any row
  rows.values.resize(size_t(rows.count * head_dim));
  rows.keys_transposed.assign(size_t(rows.padded * head_dim), 0.0f);
  if (rows.count == 0) return rows;
  std::vector<float> keys(size_t(rows.count * head_dim));
  read(begin, end, keys.data(), rows.values.data());
  for (int64_t r = 0; r < rows.count; ++r)
    for (int64_t d = 0; d < head_dim; ++d)
      rows.keys_transposed[size_t(d * rows.padded + r)] = keys[size_t(r * head_dim + d)];
  return rows;
}

// scores[i] = scale * q . key(first + i) for i < count, sixteen keys per fma chain over head_dim.
void score_rows(const float* query, const Rows& rows, int64_t first, int64_t count,
                int64_t head_dim, float scale, float* scores) {
  const int64_t offset = first - rows.first_position;
  alignas(64) float lanes[16];
  for (int64_t i = 0; i < count; i += 16) {
    simd::Vec16 acc = simd::Vec16::zero();
    for (int64_t d = 0; d < head_dim; ++d) {
      acc.fma(simd::Vec16::broadcast(query[d]),
              simd::Vec16::load(&rows.keys_transposed[size_t(d * rows.padded + offset + i)]));
    }
    acc.scale(scale);
    acc.store(lanes);
    for (int64_t l = 0; l < std::min<int64_t>(16, count - i); ++l) scores[i + l] = lanes[l];
  }
}

// out += sum_i weights[i] * value(first + i), in position order.
void accumulate_values(const float* weights, const Rows& rows, int64_t first, int64_t count,
                       int64_t head_dim, float* out) {
  const int64_t offset = first - rows.first_position;
  for (int64_t i = 0; i < count; ++i) {
    simd::axpy(weights[i], &rows.values[size_t((offset + i) * head_dim)], out, head_dim);
  }
}

}  // namespace

void cpu_attention(const CpuKvStore& store, const KvCacheConfig& kv, const ModelConfig& model,
                   const AttentionRequest& r) {
  const int64_t d = model.head_dim;
  const int64_t group = model.group_size();
  const int64_t heads = model.num_heads;
  const int64_t end = r.first_position + r.count;
  const int64_t sink = kv.sink_tokens;  // the quantized region starts here (quantized_end >= sink)
  auto boundary = [&](int64_t position) {
    return quantized_end(kv, position + 1, r.full_precision_until);
  };
  auto band_boundary = [&](int64_t position) {
    return band_begin(kv, position + 1, r.full_precision_until);
  };
  // Rows [0, min(sink, end)) and [window_start, end) may be read in full precision by some query
  // of the chunk; rows [sink, quantized_stop) quantized.
  const int64_t sink_rows = std::min(sink, end);
  const int64_t window_start = std::max(sink_rows, std::min(boundary(r.first_position), end));
  const int64_t quantized_stop = boundary(end - 1);
  const int64_t int2_stop = band_boundary(end - 1);
  const int64_t band_start = band_step_begin(kv, r.first_position, end, r.full_precision_until);
  const float scale = 1.0f / std::sqrt(float(d));

  std::vector<GatheredHead> gathered(size_t(model.num_kv_heads));
  parallel_for(0, model.num_kv_heads, [&](int64_t h) {
    auto full = [&](int64_t b, int64_t e, float* k, float* v) {
      store.read_full(r.layer, *r.pages, h, b, e, k, v);
    };
    auto quantized = [&](int64_t b, int64_t e, float* k, float* v) {
      store.read_quantized(r.layer, *r.pages, h, b, e, k, v);
    };
    auto band = [&](int64_t b, int64_t e, float* k, float* v) {
      store.read_band(r.layer, *r.pages, h, b, e, k, v);
    };
    GatheredHead& g = gathered[size_t(h)];
    g.sink = gather_rows(0, sink_rows, d, full);
    g.window = gather_rows(window_start, end, d, full);
    g.quantized = gather_rows(sink, int2_stop, d, quantized);
    g.band = gather_rows(band_start, quantized_stop, d, band);
  });

  const int64_t blocks = (r.count + kQueryBlock - 1) / kQueryBlock;
  parallel_for(
      0, model.num_kv_heads * blocks,
      [&](int64_t task) {
        const int64_t kv_head = task / blocks;
        const GatheredHead& g = gathered[size_t(kv_head)];
        const int64_t first = (task % blocks) * kQueryBlock;
        std::vector<float> weights(size_t(end + 16));
        for (int64_t i = first; i < std::min(r.count, first + kQueryBlock); ++i) {
          const int64_t t = r.first_position + i;
          // Position order: sink [0, a), 2-bit [sink, c), band [c, b), full precision [b, t].
          const int64_t a = std::min(sink, t + 1);
          const int64_t b = std::max(sink, boundary(t));
          const int64_t c = std::max(sink, band_boundary(t));
          const int64_t quantized_count = std::max<int64_t>(0, std::min(c, t + 1) - sink);
          const int64_t band_count = std::max<int64_t>(0, std::min(b, t + 1) - c);
          const int64_t scanned = a + quantized_count + band_count;  // scores before the tail
          const int64_t tail_start = std::max(a, b);
          const int64_t tail_count = std::max<int64_t>(0, t + 1 - tail_start);
          for (int64_t q = 0; q < group; ++q) {
            const int64_t head = kv_head * group + q;
            const float* query = r.queries + (i * heads + head) * d;
            float* scores = weights.data();
            score_rows(query, g.sink, 0, a, d, scale, scores);
            score_rows(query, g.quantized, sink, quantized_count, d, scale, scores + a);
            score_rows(query, g.band, c, band_count, d, scale, scores + a + quantized_count);
            score_rows(query, g.window, tail_start, tail_count, d, scale, scores + scanned);
            const int64_t total = scanned + tail_count;
            float max_score = -std::numeric_limits<float>::infinity();
            for (int64_t j = 0; j < total; ++j) max_score = std::max(max_score, scores[j]);
            float sum = 0;
            for (int64_t j = 0; j < total; ++j) {
              scores[j] = std::exp(scores[j] - max_score);
              sum += scores[j];
            }
            const float inverse = 1.0f / sum;
            for (int64_t j = 0; j < total; ++j) scores[j] *= inverse;
            float* out = r.output + (i * heads + head) * d;
            std::fill(out, out + d, 0.0f);
            accumulate_values(scores, g.sink, 0, a, d, out);
            accumulate_values(scores + a, g.quantized, sink, quantized_count, d, out);
            accumulate_values(scores + a + quantized_count, g.band, c, band_count, d, out);
            accumulate_values(scores + scanned, g.window, tail_start, tail_count, d, out);
          }
        }
      },
      /*dynamic_schedule=*/true);
}

}  // namespace oscar
