#include "quant/quantization_error.h"

#include <algorithm>
#include <cmath>

#include "quant/error_feedback.h"

namespace oscar {
namespace {

// y = x R (or x R^T when `transpose`), row by row, in double.
void rotate(const float* x, int64_t tokens, int64_t d, const float* r, bool transpose, float* y) {
  std::vector<double> out(static_cast<size_t>(d));
  for (int64_t t = 0; t < tokens; ++t) {
    std::fill(out.begin(), out.end(), 0.0);
    for (int64_t i = 0; i < d; ++i) {
      const double xi = x[t * d + i];
      for (int64_t j = 0; j < d; ++j)
        out[size_t(j)] += xi * (transpose ? r[j * d + i] : r[i * d + j]);
    }
    for (int64_t j = 0; j < d; ++j) y[t * d + j] = float(out[size_t(j)]);
  }
}

void round_trip_per_token(float* rows, int64_t tokens, int64_t d, const RowCodec& c) {
  std::vector<uint8_t> codes(size_t(packed_bytes(c.group_size, c.bits)));
  std::vector<GroupParams> params(size_t(d / c.group_size));
  std::vector<float> dequantized(static_cast<size_t>(d));
  for (int64_t t = 0; t < tokens; ++t) {
    const std::span<const float> row(rows + t * d, size_t(d));
    choose_row_params(row, c.group_size, c.bits, c.clip, c.param_format, params);
    if (c.feedback != nullptr) {
      round_with_feedback(row, params, c.group_size, c.bits, std::span(c.feedback, size_t(d * d)),
                          dequantized);
      std::copy(dequantized.begin(), dequantized.end(), rows + t * d);
      continue;
    }
    for (int64_t g = 0; g < d / c.group_size; ++g) {
      quantize_group(row.subspan(size_t(g * c.group_size), size_t(c.group_size)), params[size_t(g)],
                     c.bits, codes.data());
      dequantize_group(codes.data(), 0, c.group_size, params[size_t(g)], c.bits,
                       rows + t * d + g * c.group_size);
    }
  }
}

void round_trip_per_channel(float* rows, int64_t tokens, int64_t d, const RowCodec& c) {
  std::vector<float> channel;
  std::vector<uint8_t> codes;
  for (int64_t start = 0; start < tokens; start += c.group_size) {
    const int64_t count = std::min<int64_t>(c.group_size, tokens - start);
    channel.resize(size_t(count));
    codes.assign(size_t(packed_bytes(int(count + 3) / 4 * 4, c.bits)), 0);
    for (int64_t j = 0; j < d; ++j) {
      for (int64_t t = 0; t < count; ++t) channel[size_t(t)] = rows[(start + t) * d + j];
      const GroupParams p = choose_group_params(channel, c.bits, c.clip, c.param_format);
      quantize_group(channel, p, c.bits, codes.data());
      dequantize_group(codes.data(), 0, int(count), p, c.bits, channel.data());
      for (int64_t t = 0; t < count; ++t) rows[(start + t) * d + j] = channel[size_t(t)];
    }
  }
}

}  // namespace

std::vector<float> quantize_round_trip(const float* rows, int64_t tokens, int64_t d,
                                       const float* rotation, const RowCodec& codec) {
  std::vector<float> work(rows, rows + tokens * d);
  if (rotation != nullptr) rotate(rows, tokens, d, rotation, false, work.data());
  if (codec.per_channel) {
    round_trip_per_channel(work.data(), tokens, d, codec);
  } else {
    round_trip_per_token(work.data(), tokens, d, codec);
  }
  if (rotation == nullptr) return work;
  std::vector<float> back(work.size());
  rotate(work.data(), tokens, d, rotation, true, back.data());
  return back;
}

AttentionError attention_error(const float* queries, int64_t group, const float* keys,
                               const float* values, const float* keys_hat, const float* values_hat,
                               int64_t tokens, int64_t d, int64_t query_stride) {
  double logit_error = 0, logit_norm = 0, output_error = 0, output_norm = 0;
  const double scale = 1.0 / std::sqrt(double(d));
  std::vector<double> exact(static_cast<size_t>(tokens)), approx(static_cast<size_t>(tokens));
  std::vector<double> out_exact(static_cast<size_t>(d)), out_approx(static_cast<size_t>(d));
  for (int64_t t = query_stride - 1; t < tokens; t += query_stride) {
    for (int64_t h = 0; h < group; ++h) {
      const float* q = queries + (t * group + h) * d;
      double max_exact = -1e300, max_approx = -1e300;
      for (int64_t j = 0; j <= t; ++j) {
        double a = 0, b = 0;
        for (int64_t i = 0; i < d; ++i) {
          a += double(q[i]) * keys[j * d + i];
          b += double(q[i]) * keys_hat[j * d + i];
        }
        logit_error += (a - b) * (a - b);
        logit_norm += a * a;
        exact[size_t(j)] = a * scale;
        approx[size_t(j)] = b * scale;
        max_exact = std::max(max_exact, exact[size_t(j)]);
        max_approx = std::max(max_approx, approx[size_t(j)]);
      }
      double sum_exact = 0, sum_approx = 0;
      for (int64_t j = 0; j <= t; ++j) {
        exact[size_t(j)] = std::exp(exact[size_t(j)] - max_exact);
        approx[size_t(j)] = std::exp(approx[size_t(j)] - max_approx);
        sum_exact += exact[size_t(j)];
        sum_approx += approx[size_t(j)];
      }
      std::fill(out_exact.begin(), out_exact.end(), 0.0);
      std::fill(out_approx.begin(), out_approx.end(), 0.0);
      for (int64_t j = 0; j <= t; ++j) {
        for (int64_t i = 0; i < d; ++i) {
          out_exact[size_t(i)] += exact[size_t(j)] / sum_exact * values[j * d + i];
          out_approx[size_t(i)] += approx[size_t(j)] / sum_approx * values_hat[j * d + i];
        }
      }
      for (int64_t i = 0; i < d; ++i) {
        const double diff = out_exact[size_t(i)] - out_approx[size_t(i)];
        output_error += diff * diff;
        output_norm += out_exact[size_t(i)] * out_exact[size_t(i)];
      }
    }
  }
  return {std::sqrt(logit_error / std::max(logit_norm, 1e-300)),
          std::sqrt(output_error / std::max(output_norm, 1e-300))};
}

}  // namespace oscar
