// Each CUDA kernel against its CPU reference on random (never zero) inputs; skips without a GPU.
// Tolerances are stated per test as ||gpu - ref|| / ||ref|| (or max abs where noted):
//   float kernels: q/k norm + RoPE and the KV write's rotation 1e-5 against cpu_math / rope (its
//     bf16 keys and values 4e-3); RMSNorm and SwiGLU 4e-3 (their outputs are bf16, the next
//     product's input);
//   bf16 matrix products (float accumulation, float output; skinny_linear and cuBLAS): 1e-5 against
//     float64 products of the same bf16 inputs;
//   decode attention, bf16 pages: 2e-3; INT2/INT4 pages: 5e-3 (f16 P * scale operand), against a
//     float64 softmax over the pages' dequantized values (group_codec.h on the host);
//   migration of tokens out of the recent window: exact, the CPU store's codes and parameters;
#include <gtest/gtest.h>

#ifdef OSCAR_HAVE_CUDA

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "backend/backend.h"
#include "backend/cpu/cpu_math.h"
#include "backend/cuda/attention_combine.h"
#include "backend/cuda/decode_attention.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/device_step.h"
#include "backend/cuda/gate_up_layout.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/kv_noise.h"
#include "backend/cuda/layer_kernels.h"
#include "backend/cuda/prefill_attention.h"
#include "backend/cuda/q8_scale_table.h"
#include "backend/cpu/cpu_kv_store.h"
#include "backend/cuda/step_plan.h"
#include "quant/group_codec.h"
#include "quant/error_feedback.h"
#include "util/half.h"

namespace oscar::cuda {
namespace {

std::vector<float> random_floats(size_t count, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> distribution(lo, hi);
  std::vector<float> values(count);
  for (float& v : values) {
    do v = distribution(generator);
    while (v == 0.0f);
  }
  return values;
}

template <typename T>
DeviceBuffer<T> to_device(const std::vector<T>& host) {
  DeviceBuffer<T> device(host.size());
  check(cudaMemcpy(device.data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "test upload");
  return device;
}

template <typename T>
std::vector<T> to_host(const DeviceBuffer<T>& device, size_t count) {
  std::vector<T> host(count);
  check(cudaDeviceSynchronize(), "test synchronize");
  check(cudaMemcpy(host.data(), device.data(), count * sizeof(T), cudaMemcpyDeviceToHost), "test download");
  return host;
}

// bf16 bit patterns of random_floats' values.
std::vector<uint16_t> random_bf16(size_t count, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  const std::vector<float> values = random_floats(count, seed, lo, hi);
  std::vector<uint16_t> bits(count);
  for (size_t i = 0; i < count; ++i) bits[i] = float_to_bf16(values[i]);
  return bits;
}

// A device bf16 array's first `count` bit patterns.
std::vector<uint16_t> bf16_bits(const DeviceBuffer<__nv_bfloat16>& device, size_t count) {
  std::vector<uint16_t> bits(count);
  check(cudaDeviceSynchronize(), "test synchronize");
  check(cudaMemcpy(bits.data(), device.data(), count * 2, cudaMemcpyDeviceToHost), "test download");
  return bits;
}

std::vector<float> floats_of_bf16(const std::vector<uint16_t>& bits) {
  std::vector<float> out(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) out[i] = bf16_to_float(bits[i]);
  return out;
}

double relative_error(const std::vector<double>& reference, const std::vector<float>& actual) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < reference.size(); ++i) {
    if (!std::isfinite(actual[i])) return INFINITY;
    diff += (reference[i] - actual[i]) * (reference[i] - actual[i]);
    norm += reference[i] * reference[i];
  }
  return std::sqrt(diff / norm);
}

std::vector<double> widen(const std::vector<float>& values) { return {values.begin(), values.end()}; }

class CudaKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  }
};

// A suite of named cases (each Case has a `name`), skipped without a GPU.
template <typename Case>
class CudaCases : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  }
};

template <typename Case>
std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return info.param.name;
}

// Widths of the testbed (512), Qwen3-8B (4096) and Qwen3-32B (5120, not a multiple of the block's
// 1024 floats per pass); the last case reads its rows through a row map, as the final norm does.
TEST_F(CudaKernels, AddRmsNormMatchesCpu) {
  for (const int64_t width : {512, 4096, 5120}) {
    const int64_t rows = 5;
    auto hidden = random_floats(size_t(rows * width), 1), delta = random_floats(size_t(rows * width), 2);
    const auto weight = random_floats(size_t(width), 3, 0.5f, 1.5f);
    auto d_hidden = to_device(hidden);
    const auto d_delta = to_device(delta), d_weight = to_device(weight);
    const std::vector<int32_t> row_map = {3, 0};
    const auto d_row_map = to_device(row_map);
    const bool mapped = width == 5120;
    const int64_t out_rows = mapped ? int64_t(row_map.size()) : rows;
    DeviceBuffer<__nv_bfloat16> out(size_t(out_rows * width));
    launch_add_rms_norm(d_hidden.data(), d_delta.data(), mapped ? d_row_map.data() : nullptr, out_rows, width,
                        d_weight.data(), 1e-6f, out.data(), nullptr);
    std::vector<float> normed(hidden.size());
    for (int64_t r = 0; r < out_rows; ++r) {
      const int64_t source = mapped ? row_map[size_t(r)] : r;
      for (int64_t i = 0; i < width; ++i) hidden[size_t(source * width + i)] += delta[size_t(source * width + i)];
      rms_norm(&hidden[size_t(source * width)], 1, width, weight.data(), 1e-6, &normed[size_t(r * width)]);
    }
    normed.resize(size_t(out_rows * width));
    const std::vector<uint16_t> bits = bf16_bits(out, normed.size());
    EXPECT_LE(relative_error(widen(hidden), to_host(d_hidden, hidden.size())), 1e-6) << "width " << width;
    EXPECT_LE(relative_error(widen(normed), floats_of_bf16(bits)), 4e-3) << "width " << width;  // bf16 output
  }
}

// The gate|up product's columns interleaved as gate_up_layout.h orders them.
TEST_F(CudaKernels, SwigluMatchesCpu) {
  const int64_t rows = 3, inner = 3000;
  const auto gate_up = random_floats(size_t(rows * 2 * inner), 4, -4.f, 4.f);
  std::vector<float> gate(size_t(rows * inner)), up(size_t(rows * inner)), expected(size_t(rows * inner));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < inner; ++i) {
      gate[size_t(r * inner + i)] = gate_up[size_t(r * 2 * inner + gate_column(i))];
      up[size_t(r * inner + i)] = gate_up[size_t(r * 2 * inner + up_column(i))];
    }
  swiglu(gate.data(), up.data(), rows * inner, expected.data());
  const auto d_gate_up = to_device(gate_up);
  DeviceBuffer<__nv_bfloat16> out(size_t(rows * inner));
  launch_swiglu(d_gate_up.data(), rows, inner, out.data(), nullptr);
  EXPECT_LE(relative_error(widen(expected), floats_of_bf16(bf16_bits(out, expected.size()))), 4e-3);
}

// Up to 32 rows take skinny_linear (decode steps: 1-2 rows its FMA kernel, 3-32 one to four mma
// tiles of 8 rows, full and partial), 33 cuBLAS; 770 outputs leave a partial tile of outputs; 1056
// inputs (33 steps of 32) split unevenly over the warps and leave a tail after the unrolled loop
// (of 4 steps up to 16 rows, 2 beyond); the second product accumulates into the first's result.
TEST_F(CudaKernels, GemmMatchesFloat64) {
  const int64_t outputs = 770;
  for (const int64_t inputs : {1024, 1056}) {
    for (const int64_t rows : {1, 2, 3, 8, 9, 16, 17, 24, 25, 32, 33}) {
      const auto x = random_bf16(size_t(rows * inputs), 5), w = random_bf16(size_t(outputs * inputs), 6, -0.05f, 0.05f);
      std::vector<double> expected(size_t(rows * outputs), 0.0);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t o = 0; o < outputs; ++o)
          for (int64_t i = 0; i < inputs; ++i)
            expected[size_t(r * outputs + o)] += double(bf16_to_float(x[size_t(r * inputs + i)])) *
                                                 bf16_to_float(w[size_t(o * inputs + i)]);
      const auto d_x = to_device(x), d_w = to_device(w);
      DeviceBuffer<float> y(size_t(rows * outputs));
      cudaStream_t stream = nullptr;
      Gemm gemm(stream);
      const auto* xs = reinterpret_cast<const __nv_bfloat16*>(d_x.data());
      const auto* ws = reinterpret_cast<const __nv_bfloat16*>(d_w.data());
      gemm.linear(xs, rows, ws, outputs, inputs, y.data());
      EXPECT_LE(relative_error(expected, to_host(y, expected.size())), 1e-5) << rows << " x " << inputs;  // float sums
      gemm.linear(xs, rows, ws, outputs, inputs, y.data(), /*accumulate=*/true);
      for (double& e : expected) e *= 2;
      EXPECT_LE(relative_error(expected, to_host(y, expected.size())), 1e-5) << rows << " x " << inputs
                                                                          << ", accumulated";
    }
  }
}

// The gate|up product with SwiGLU (Gemm::linear_swiglu): up to 32 rows one kernel that applies
// SwiGLU itself, the same to the bit as the product's float output through the SwiGLU kernel; 33
// rows cuBLAS then that kernel. 388 pairs leave a partial tile of 16 outputs; against the CPU's
// swiglu of float64 sums, bf16 output.
TEST_F(CudaKernels, GemmSwigluMatchesUnfusedAndCpu) {
  const int64_t inner = 388, inputs = 1056, outputs = 2 * inner;
  for (const int64_t rows : {1, 2, 3, 8, 9, 16, 17, 29, 33}) {
    const auto x = random_bf16(size_t(rows * inputs), 15), w = random_bf16(size_t(outputs * inputs), 16, -0.05f, 0.05f);
    std::vector<float> gate(size_t(rows * inner)), up(size_t(rows * inner)), expected(size_t(rows * inner));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t i = 0; i < inner; ++i) {
        double g = 0, u = 0;
        for (int64_t k = 0; k < inputs; ++k) {
          const double xv = bf16_to_float(x[size_t(r * inputs + k)]);
          g += xv * bf16_to_float(w[size_t(gate_column(i) * inputs + k)]);
          u += xv * bf16_to_float(w[size_t(up_column(i) * inputs + k)]);
        }
        gate[size_t(r * inner + i)] = float(g);
        up[size_t(r * inner + i)] = float(u);
      }
    }
    swiglu(gate.data(), up.data(), rows * inner, expected.data());
    const auto d_x = to_device(x), d_w = to_device(w);
    const auto* xs = reinterpret_cast<const __nv_bfloat16*>(d_x.data());
    const auto* ws = reinterpret_cast<const __nv_bfloat16*>(d_w.data());
    Gemm gemm(nullptr);
    DeviceBuffer<float> gate_up(size_t(rows * outputs));
    DeviceBuffer<__nv_bfloat16> fused(size_t(rows * inner)), unfused(size_t(rows * inner));
    gemm.linear_swiglu(xs, rows, ws, inner, inputs, gate_up.data(), fused.data());
    gemm.linear(xs, rows, ws, outputs, inputs, gate_up.data());
    launch_swiglu(gate_up.data(), rows, inner, unfused.data(), nullptr);
    const std::vector<uint16_t> fused_bits = bf16_bits(fused, expected.size());
    EXPECT_EQ(fused_bits, bf16_bits(unfused, expected.size())) << rows << " rows";
    EXPECT_LE(relative_error(widen(expected), floats_of_bf16(fused_bits)), 4e-3) << rows << " rows";
  }
}

// q/k norm + RoPE, then the KV write, of 3, 21 and 75 rows (positions 1, 68, 40007, then spread to
// 60K; a decode step's tiles of 8 rows, a prefill chunk's wider slices) with and without q/k norm
// weights and a key rotation: the q and k parts of the rows normed and rotary-embedded in place as
// on the CPU, the v part untouched, the queries rotated by R_K, the keys rotated and the values as
// bf16 in each row's page slot.
TEST_F(CudaKernels, QkNormRopeAndKvWriteMatchCpu) {
  const int heads = 8, kv_heads = 2, d = 128, group = heads / kv_heads;
  const int64_t stride = (heads + 2 * kv_heads) * d;
  KvCacheConfig kv;
  kv.page_size_tokens = 64;
  const PageLayout layout = make_page_layout(kv, kv_heads, d);
  for (const auto& [rows, norms_and_rotation] :
       {std::pair<int64_t, bool>{3, true}, {3, false}, {21, true}, {75, true}, {75, false}}) {
    const auto qkv = random_floats(size_t(rows * stride), 7, -3.f, 3.f);
    const auto q_norm = random_floats(size_t(d), 8, 0.5f, 1.5f), k_norm = random_floats(size_t(d), 9, 0.5f, 1.5f);
    const auto rotation = random_floats(size_t(kv_heads * d * d), 10, -0.2f, 0.2f);
    std::vector<float> inverse(size_t(d / 2));
    for (int i = 0; i < d / 2; ++i) inverse[size_t(i)] = float(std::pow(1e6, -2.0 * i / d));
    // Each row is a sequence of its own whose last logical page is physical page rows - 1 - r.
    std::vector<int32_t> positions = {1, 68, 40007};
    for (int64_t r = 3; r < rows; ++r) positions.push_back(int32_t(r * 7919 % 60000));
    std::vector<QueryRow> row_records;
    std::vector<PageIds> page_table;
    for (int64_t r = 0; r < rows; ++r) {
      row_records.push_back({positions[size_t(r)], int32_t(page_table.size()), 0, 0});
      page_table.resize(page_table.size() + size_t(positions[size_t(r)] / 64), PageIds{-1, -1, -1});
      page_table.push_back({int32_t(rows - 1 - r), -1, -1});
    }
    std::vector<float> expected = qkv;
    std::vector<double> expected_queries, expected_keys, expected_values;
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> c(size_t(d / 2)), s(size_t(d / 2));
      for (int i = 0; i < d / 2; ++i) {
        const float angle = float(positions[size_t(r)]) * inverse[size_t(i)];
        c[size_t(i)] = float(std::cos(double(angle)));
        s[size_t(i)] = float(std::sin(double(angle)));
      }
      for (int h = 0; h < heads + kv_heads; ++h) {
        float* x = &expected[size_t(r * stride + h * d)];
        if (norms_and_rotation) rms_norm(x, 1, d, h < heads ? q_norm.data() : k_norm.data(), 1e-6, x);
        for (int i = 0; i < d / 2; ++i) {
          const float a = x[i], b = x[i + d / 2];
          x[i] = a * c[size_t(i)] - b * s[size_t(i)];
          x[i + d / 2] = b * c[size_t(i)] + a * s[size_t(i)];
        }
      }
      auto rotated = [&](int64_t head_offset, int kv_head, int j) {
        const float* x = &expected[size_t(r * stride + head_offset * d)];
        if (!norms_and_rotation) return double(x[j]);
        double sum = 0;
        for (int i = 0; i < d; ++i) sum += double(x[i]) * rotation[size_t((kv_head * d + i) * d + j)];
        return sum;
      };
      for (int h = 0; h < heads; ++h) {
        for (int j = 0; j < d; ++j) expected_queries.push_back(rotated(h, h / group, j));
      }
      for (int h = 0; h < kv_heads; ++h) {
        for (int j = 0; j < d; ++j) {
          expected_keys.push_back(rotated(heads + h, h, j));
          expected_values.push_back(qkv[size_t(r * stride + (heads + kv_heads + h) * d + j)]);
        }
      }
    }
    auto d_qkv = to_device(qkv);
    const auto d_q_norm = to_device(q_norm), d_k_norm = to_device(k_norm), d_inverse = to_device(inverse);
    const auto d_rotation = to_device(rotation);
    const auto d_rows = to_device(row_records);
    const auto d_page_table = to_device(page_table);
    DeviceBuffer<std::byte> pages(size_t(rows * layout.full_page_bytes));
    DeviceBuffer<float> rotated_queries(size_t(rows * heads * d));
    QkNormRopeArgs rope{d_qkv.data(), stride, heads, kv_heads, d, d_rows.data(),
                        norms_and_rotation ? d_q_norm.data() : nullptr,
                        norms_and_rotation ? d_k_norm.data() : nullptr, 1e-6f, d_inverse.data()};
    launch_qk_norm_rope(rope, rows, nullptr);
    KvWriteArgs args;
    args.qkv = d_qkv.data();
    args.row_stride = stride;
    args.num_heads = heads;
    args.num_kv_heads = kv_heads;
    args.rows = d_rows.data();
    args.page_table = d_page_table.data();
    args.layout = layout;
    args.full_pages = pages.data();
    args.key_rotations = norms_and_rotation ? d_rotation.data() : nullptr;
    args.rotated_queries = rotated_queries.data();
    launch_kv_write(args, rows, nullptr);
    const auto actual = to_host(d_qkv, qkv.size());
    for (int64_t r = 0; r < rows; ++r) {  // the v part is untouched
      for (int64_t i = (heads + kv_heads) * d; i < stride; ++i) {
        EXPECT_EQ(actual[size_t(r * stride + i)], qkv[size_t(r * stride + i)]);
      }
    }
    EXPECT_LE(relative_error(widen(expected), actual), 1e-5)
        << rows << " rows: q and k in place, norms " << norms_and_rotation;
    EXPECT_LE(relative_error(expected_queries, to_host(rotated_queries, expected_queries.size())), 1e-5)
        << rows << " rows: rotated queries, rotation " << norms_and_rotation;
    const auto page_bytes = to_host(pages, pages.size());
    std::vector<float> keys, values;
    for (int64_t r = 0; r < rows; ++r) {
      const std::byte* page = page_bytes.data() + (rows - 1 - r) * layout.full_page_bytes;
      const int64_t slot = positions[size_t(r)] % 64;
      for (int h = 0; h < kv_heads; ++h) {
        for (const bool key : {true, false}) {
          const auto* bits = reinterpret_cast<const uint16_t*>(
              page + (key ? layout.full_key_offset(h, slot) : layout.full_value_offset(h, slot)));
          for (int j = 0; j < d; ++j) (key ? keys : values).push_back(bf16_to_float(bits[j]));
        }
      }
    }
    EXPECT_LE(relative_error(expected_keys, keys), 4e-3) << rows << " rows: keys, rotation " << norms_and_rotation;
    EXPECT_LE(relative_error(expected_values, values), 4e-3) << rows << " rows: values";  // bf16
  }
}

// ---- decode attention --------------------------------------------------------------------------

struct AttentionCase {
  const char* name;
  KvDtype dtype;
  int group_size;
  ParamFormat param_format;
  int query_group;  // query heads per KV head
  double tolerance;
  int64_t sink_tokens = 64;
  int page_size_tokens = 64;  // super-tiles are 64 (INT2) or 32 (INT4) tokens: other sizes put one across pages
  int64_t band_tokens = 0;
};

// The page arenas of the decode attention test, downloaded.
struct HostArenas {
  std::vector<std::byte> full, quantized, band;
};

// Reference: float64 softmax(q . k / sqrt(D)) v over the page bytes, dequantized by group_codec.
std::vector<double> reference_attention(const PageLayout& layout, const PageLayout& band_layout,
                                        const KvCacheConfig& kv, const HostArenas& arenas,
                                        const std::vector<LogicalPage>& pages, int64_t t, const float* queries,
                                        int num_kv_heads, int group) {
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
          key[size_t(c)] = bf16_to_float(reinterpret_cast<const uint16_t*>(base + layout.full_key_offset(h, slot))[c]);
          value[size_t(c)] = bf16_to_float(reinterpret_cast<const uint16_t*>(base + layout.full_value_offset(h, slot))[c]);
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
void write_rising_keys(const KvCacheConfig& kv, const PageLayout& layout, const PageLayout& band_layout,
                       HostArenas& arenas, const std::vector<LogicalPage>& pages, int64_t last, int num_kv_heads,
                       float top) {
  const int64_t d = layout.head_dim;
  for (int64_t j = 0; j <= last; ++j) {
    const float z = top * float(j) / float(last);
    const LogicalPage page = pages[size_t(j / layout.page_size_tokens)];
    const int64_t slot = j % layout.page_size_tokens;
    for (int h = 0; h < num_kv_heads; ++h) {
      auto* full = reinterpret_cast<uint16_t*>(arenas.full.data() + page.full * layout.full_page_bytes +
                                               layout.full_key_offset(h, slot));
      for (int64_t c = 0; c < d; ++c) full[c] = float_to_bf16(z);
      for (const bool banded : {false, true}) {
        if (banded ? !kv.has_band() : layout.bits == 0) continue;
        const PageLayout& l = banded ? band_layout : layout;
        auto* base = reinterpret_cast<uint8_t*>(banded ? arenas.band.data() + page.band * l.quantized_page_bytes
                                                       : arenas.quantized.data() + page.quantized * l.quantized_page_bytes);
        std::memset(base + l.key_codes(h, slot), 0, size_t(d * l.bits / 8));
        for (int64_t g = 0; g < d / l.group_size; ++g) {
          store_params(params_for_range(z, z, l.bits, l.param_format), l.param_format, base + l.key_params(h, slot, g));
        }
      }
    }
  }
}

// Sequences of `cached[s]` tokens, each with a step of `step_tokens[s]` query rows (1: a decode
// row), every page present in every format at shuffled page ids, random page bytes and queries; the
// step's attention through the decode kernel (`prefill` false: single-token steps; on
// `decode_grid` blocks, 0: as many as the GPU holds at once; in splits of `split_tokens`
// positions, 0: the plan's) or the prefill kernel, then the combine, each query row against
// float64. `score_rise` > 0: the keys rewritten by write_rising_keys and the queries shifted by +1
// (channel sums near +128), so that every head's scores rise by about that much (natural log
// units) from the first position to the last.
void expect_attention_matches_reference(const AttentionCase& a, const std::vector<int64_t>& cached,
                                        const std::vector<int64_t>& step_tokens, bool prefill, int decode_grid = 0,
                                        int64_t split_tokens = 0, double score_rise = 0.0, bool pair_m_tiles = false) {
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
  const PageLayout band_layout = kv.has_band() ? make_band_layout(kv, num_kv_heads, d) : PageLayout{};
  // Each sequence's pages cover its last query row's position.
  std::vector<int64_t> last_position(cached.size());
  int64_t page_count = 0, row_count = 0;
  for (size_t s = 0; s < cached.size(); ++s) {
    last_position[s] = cached[s] + step_tokens[s] - 1;
    page_count += last_position[s] / kv.page_size_tokens + 1;
    row_count += step_tokens[s];
  }
  DeviceBuffer<std::byte> full(size_t(page_count * layout.full_page_bytes));
  DeviceBuffer<std::byte> quantized(size_t(std::max<int64_t>(1, page_count * layout.quantized_page_bytes)));
  DeviceBuffer<std::byte> band(size_t(std::max<int64_t>(1, page_count * band_layout.quantized_page_bytes)));
  launch_fill_kv_noise(layout, full.data(), page_count, layout.bits > 0 ? quantized.data() : nullptr, page_count, 11,
                       nullptr);
  if (kv.has_band()) launch_fill_kv_noise(band_layout, nullptr, 0, band.data(), page_count, 13, nullptr);
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
      tables[s].push_back({ids[next_id], layout.bits > 0 ? ids[page_count - 1 - int64_t(next_id)] : -1,
                           kv.has_band() ? band_ids[next_id] : -1});
    }
    sequences[s].attach_prefix(tables[s], cached[s]);
  }
  HostArenas arenas{to_host(full, full.size()), to_host(quantized, quantized.size()), to_host(band, band.size())};
  if (score_rise > 0) {
    const float top = float(score_rise * std::sqrt(double(d)) / d);  // a query's channels sum to about d
    for (size_t s = 0; s < cached.size(); ++s) {
      write_rising_keys(kv, layout, band_layout, arenas, tables[s], last_position[s], num_kv_heads, top);
    }
    upload(arenas.full, full);
    upload(arenas.quantized, quantized);
    upload(arenas.band, band);
  }
  int64_t first_token = 0;
  for (size_t s = 0; s < cached.size(); ++s) {
    steps.push_back({std::span(&tokens[size_t(first_token)], size_t(step_tokens[s])), &sequences[s], false});
    first_token += step_tokens[s];
  }
  StepPlanShape shape{num_kv_heads, a.query_group, true, decode_attention_resident_blocks(layout)};
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
  DeviceBuffer<float> partials(size_t(plan.partial_records * partial_record_floats(a.query_group, d)));
  const DeviceBuffer<float> d_q8 = make_q8_scale_table();
  AttentionArgs args;
  args.layout = layout;
  args.sink_tokens = kv.sink_tokens;
  args.full_pages = full.data();
  args.quantized_pages = layout.bits > 0 ? quantized.data() : nullptr;
  args.band_layout = band_layout;
  args.band_pages = kv.has_band() ? band.data() : nullptr;
  args.rows = device_step.rows();
  args.page_table = device_step.page_table();
  args.counts = device_step.counts();
  args.decode_items = device_step.decode_items();
  args.block_items = device_step.block_items();
  args.queries = d_queries.data();
  args.partials = partials.data();
  args.num_kv_heads = num_kv_heads;
  args.group = a.query_group;
  args.score_scale = attention_score_scale(d);
  args.q8_scales = d_q8.data();
  args.pair_m_tiles = pair_m_tiles;
  if (prefill) {
    launch_prefill_attention(args, prefill_attention_resident_blocks(), nullptr);
  } else {
    launch_decode_attention(args, decode_grid > 0 ? decode_grid : decode_attention_resident_blocks(layout), nullptr);
  }
  DeviceBuffer<__nv_bfloat16> out(size_t(row_count * q_width));
  DeviceBuffer<float> out_float(out.size());
  launch_attention_combine(device_step.combine(), row_count, plan.max_splits(), partials.data(), num_kv_heads,
                           a.query_group, d, out.data(), out_float.data(), nullptr);
  const auto actual = to_host(out_float, out_float.size());
  int64_t row = 0;
  for (size_t s = 0; s < cached.size(); ++s) {
    double worst = 0.0;
    for (int64_t t = cached[s]; t <= last_position[s]; ++t, ++row) {
      const auto expected = reference_attention(layout, band_layout, kv, arenas, tables[s], t,
                                                queries.data() + row * q_width, num_kv_heads, a.query_group);
      const std::vector<float> got(actual.begin() + ptrdiff_t(row * q_width),
                                   actual.begin() + ptrdiff_t((row + 1) * q_width));
      const double error = relative_error(expected, got);
      worst = std::max(worst, error);
      EXPECT_LE(error, a.tolerance) << "sequence " << s << ", position " << t;
    }
    std::printf("[ %s ] context %lld, %lld rows: largest relative error %.2e\n", a.name,
                static_cast<long long>(cached[s] + 1), static_cast<long long>(step_tokens[s]), worst);
  }
}

class CudaDecodeAttention : public CudaCases<AttentionCase> {};

// Three sequences at contexts that give one, a few and many splits.
TEST_P(CudaDecodeAttention, MatchesFloat64Reference) {
  expect_attention_matches_reference(GetParam(), {37, 700, 9001}, {1, 1, 1}, /*prefill=*/false);
}

// A launch of fewer blocks than (item, KV head) units: most units are claimed from the device
// counter after the first wave, and the counter is reset for the next launch (the test's second
// launch runs the same plan through the same blocks).
TEST_P(CudaDecodeAttention, FewerBlocksThanUnitsMatchFloat64Reference) {
  for (int launch = 0; launch < 2; ++launch) {
    expect_attention_matches_reference(GetParam(), {700, 9001}, {1, 1}, /*prefill=*/false, /*decode_grid=*/7);
  }
}

// Splits of the plan's longest length (kLongerDecodeSplits, for launches of many waves): a row cut
// into two of them and a rest.
TEST_P(CudaDecodeAttention, LongSplitsMatchFloat64Reference) {
  expect_attention_matches_reference(GetParam(), {20000}, {1}, /*prefill=*/false, /*decode_grid=*/0,
                                     /*split_tokens=*/kLongerDecodeSplits[0]);
}

// Scores that rise by 30 (natural log units) along a row, in splits of 4096 positions (the plan
// would cut this one row into pieces of 256, a single INT2 super-tile per warp): each warp takes
// every fourth tile of a piece, over which its scores rise by about 20 (log2 units), so the running
// max is raised several times inside its share, each time past the kernel's slack of 4, with weights
// up to 2^4 between raises; the rescales of what was accumulated are checked against float64.
TEST_P(CudaDecodeAttention, RisingScoresMatchFloat64Reference) {
  expect_attention_matches_reference(GetParam(), {9001}, {1}, /*prefill=*/false, /*decode_grid=*/0,
                                     /*split_tokens=*/kLongestDecodeSplit, /*score_rise=*/30.0);
}

// The four tests above with the decode kernel's paired m-tiles (AttentionArgs::pair_m_tiles), where
// the format has that kernel: INT2/INT4 in groups of 64 or 128, at most four query heads per KV head.
TEST_P(CudaDecodeAttention, PairedMTilesMatchFloat64Reference) {
  const AttentionCase& a = GetParam();
  if (a.dtype == KvDtype::bf16 || a.group_size < 64 || a.query_group > 4) {
    GTEST_SKIP() << "no paired kernel for " << a.name;
  }
  expect_attention_matches_reference(a, {37, 700, 9001}, {1, 1, 1}, /*prefill=*/false, /*decode_grid=*/0,
                                     /*split_tokens=*/0, /*score_rise=*/0.0, /*pair_m_tiles=*/true);
  expect_attention_matches_reference(a, {700, 9001}, {1, 1}, /*prefill=*/false, /*decode_grid=*/7,
                                     /*split_tokens=*/0, /*score_rise=*/0.0, /*pair_m_tiles=*/true);
  expect_attention_matches_reference(a, {20000}, {1}, /*prefill=*/false, /*decode_grid=*/0,
                                     /*split_tokens=*/kLongerDecodeSplits[0], /*score_rise=*/0.0,
                                     /*pair_m_tiles=*/true);
  expect_attention_matches_reference(a, {9001}, {1}, /*prefill=*/false, /*decode_grid=*/0,
                                     /*split_tokens=*/kLongestDecodeSplit, /*score_rise=*/30.0,
                                     /*pair_m_tiles=*/true);
}

INSTANTIATE_TEST_SUITE_P(
    Formats, CudaDecodeAttention,
    ::testing::Values(AttentionCase{"bf16_gqa4", KvDtype::bf16, 128, ParamFormat::f16, 4, 2e-3},
                      AttentionCase{"bf16_gqa8", KvDtype::bf16, 128, ParamFormat::f16, 8, 2e-3},
                      AttentionCase{"int2_g128_f16_gqa4", KvDtype::int2, 128, ParamFormat::f16, 4, 5e-3},
                      AttentionCase{"int2_g64_bf16_gqa1", KvDtype::int2, 64, ParamFormat::bf16, 1, 5e-3},
                      AttentionCase{"int2_g64_q8_gqa4", KvDtype::int2, 64, ParamFormat::q8, 4, 5e-3},
                      AttentionCase{"int2_g32_q8_gqa8", KvDtype::int2, 32, ParamFormat::q8, 8, 5e-3},
                      AttentionCase{"int2_g128_q8_gqa8", KvDtype::int2, 128, ParamFormat::q8, 8, 5e-3},
                      AttentionCase{"int2_g128_q8_gqa4_sink4_page48", KvDtype::int2, 128, ParamFormat::q8, 4, 5e-3, 4,
                                    48},
                      AttentionCase{"int2_g64_f16_gqa4_sink40_page16", KvDtype::int2, 64, ParamFormat::f16, 4, 5e-3, 40,
                                    16},
                      AttentionCase{"int4_g128_f16_gqa4", KvDtype::int4, 128, ParamFormat::f16, 4, 5e-3},
                      AttentionCase{"int4_g64_q8_gqa8", KvDtype::int4, 64, ParamFormat::q8, 8, 5e-3},
                      AttentionCase{"int4_g128_bf16_gqa4_sink40_page16", KvDtype::int4, 128, ParamFormat::bf16, 4, 5e-3,
                                    40, 16},
                      AttentionCase{"int4_g32_f16_gqa4", KvDtype::int4, 32, ParamFormat::f16, 4, 5e-3},
                      // The band's INT4 items beside the INT2 super-tile path (whole pages, pages
                      // across super-tiles) and the word-load path.
                      AttentionCase{"int2_g128_q8_gqa8_band300", KvDtype::int2, 128, ParamFormat::q8, 8, 5e-3, 64, 64,
                                    300},
                      AttentionCase{"int2_g64_bf16_gqa4_band500", KvDtype::int2, 64, ParamFormat::bf16, 4, 5e-3, 64, 64,
                                    500},
                      AttentionCase{"int2_g128_f16_gqa1_sink4_page48_band200", KvDtype::int2, 128, ParamFormat::f16, 1,
                                    5e-3, 4, 48, 200},
                      AttentionCase{"int2_g64_q8_gqa4_sink40_page16_band100", KvDtype::int2, 64, ParamFormat::q8, 4,
                                    5e-3, 40, 16, 100},
                      AttentionCase{"int2_g32_f16_gqa4_band768", KvDtype::int2, 32, ParamFormat::f16, 4, 5e-3, 64, 64,
                                    768}),
    case_name<AttentionCase>);

class CudaPrefillAttention : public CudaCases<AttentionCase> {};

// Prefill chunks over a cached prefix (chunked prefill, prefix-cache hits): a chunk whose rows all
// read full precision, one whose rows cross the recent window's and the band's boundaries at
// different positions, and one of a block item and a part over a long prefix.
TEST_P(CudaPrefillAttention, MatchesFloat64Reference) {
  expect_attention_matches_reference(GetParam(), {37, 700, 3000}, {20, 130, 23}, /*prefill=*/true);
}

INSTANTIATE_TEST_SUITE_P(
    Formats, CudaPrefillAttention,
    ::testing::Values(AttentionCase{"bf16_gqa4", KvDtype::bf16, 128, ParamFormat::f16, 4, 2e-3},
                      AttentionCase{"int2_g128_q8_gqa8", KvDtype::int2, 128, ParamFormat::q8, 8, 5e-3},
                      AttentionCase{"int2_g64_bf16_gqa4_sink40_page48", KvDtype::int2, 64, ParamFormat::bf16, 4, 5e-3,
                                    40, 48},
                      AttentionCase{"int4_g32_f16_gqa2", KvDtype::int4, 32, ParamFormat::f16, 2, 5e-3},
                      AttentionCase{"int2_g128_q8_gqa8_band300", KvDtype::int2, 128, ParamFormat::q8, 8, 5e-3, 64, 64,
                                    300},
                      AttentionCase{"int2_g64_f16_gqa4_sink4_page16_band100", KvDtype::int2, 64, ParamFormat::f16, 4,
                                    5e-3, 4, 16, 100}),
    case_name<AttentionCase>);

// ---- migration out of the recent window --------------------------------------------------------

struct MigrateCase {
  const char* name;
  KvDtype dtype;
  int group_size;
  ParamFormat param_format;
  bool clip_search;
  bool key_feedback;
  bool value_feedback;
  int64_t band_tokens = 0;  // > 0: the last band_tokens migrated tokens also get band copies
};

// Every quantized value of positions [begin, end) of one layer, keys then values per head and
// position, dequantized on the host with group_codec from the quantized (or band) arena's bytes.
std::vector<float> dequantized_layer(const PageLayout& layout, const std::byte* arena,
                                     const std::vector<LogicalPage>& pages, bool band, int num_kv_heads,
                                     int64_t begin, int64_t end) {
  const int64_t d = layout.head_dim, g = layout.group_size;
  std::vector<float> out;
  std::vector<float> row(static_cast<size_t>(d));
  for (int h = 0; h < num_kv_heads; ++h) {
    for (int64_t p = begin; p < end; ++p) {
      const LogicalPage ids = pages[size_t(p / layout.page_size_tokens)];
      const auto* page =
          reinterpret_cast<const uint8_t*>(arena + (band ? ids.band : ids.quantized) * layout.quantized_page_bytes);
      const int64_t slot = p % layout.page_size_tokens;
      for (const bool key : {true, false}) {
        for (int64_t group = 0; group < d / g; ++group) {
          const uint8_t* params = page + (key ? layout.key_params(h, slot, group) : layout.value_params(h, slot, group));
          dequantize_group(page + (key ? layout.key_codes(h, slot) : layout.value_codes(h, slot)), int(group * g), int(g),
                           load_params(params, layout.param_format), layout.bits, row.data() + group * g);
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
  kv.method = KvMethod::quarot;  // rotated keys like oscar, without a rotations file; the factors come below
  kv.group_size = m.group_size;
  kv.param_format = m.param_format;
  kv.clip_search = m.clip_search;
  kv.clip_ratio_k = kOscarKeyClip;  // used by the cases without the search
  kv.clip_ratio_v = kOscarValueClip;
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
  const PageLayout band_layout = kv.has_band() ? make_band_layout(kv, num_kv_heads, d) : PageLayout{};
  const int64_t page_count = tokens / kv.page_size_tokens + 1;
  std::vector<int32_t> ids(static_cast<size_t>(page_count));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(5));
  std::vector<LogicalPage> pages;
  std::vector<PageIds> page_table;
  for (int64_t p = 0; p < page_count; ++p) {
    pages.push_back({ids[size_t(p)], ids[size_t(page_count - 1 - p)], kv.has_band() ? ids[size_t((p + 3) % page_count)] : -1});
    page_table.push_back({pages.back().full, pages.back().quantized, pages.back().band});
  }
  CpuKvStore store(kv, layout, num_layers, {page_count, page_count, kv.has_band() ? page_count : 0});
  // Factors of geometric spectra, a steeper one for keys than for values.
  std::vector<float> key_factors, value_factors;
  for (int i = 0; i < num_layers * num_kv_heads; ++i) {
    for (auto [factors, decay] : {std::pair{&key_factors, 0.93}, std::pair{&value_factors, 0.98}}) {
      std::vector<float> eigenvalues(static_cast<size_t>(d));
      for (int c = 0; c < d; ++c) eigenvalues[size_t(c)] = float((i + 1) * 50.0 * std::pow(decay, c));
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
          full[size_t((base + layout.full_key_offset(h, slot)) / 2 + c)] = float_to_bf16(keys[size_t(h * d + c)]);
          full[size_t((base + layout.full_value_offset(h, slot)) / 2 + c)] = float_to_bf16(values[size_t(h * d + c)]);
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
  auto mismatches_in = [&](const PageLayout& l, const std::vector<std::byte>& bytes, int64_t layer_bytes, bool band,
                           int64_t from, int64_t& compared) {
    std::vector<float> cpu_keys(size_t((end - from) * d)), cpu_values(cpu_keys.size());
    int64_t mismatches = 0;
    for (int layer = 0; layer < num_layers; ++layer) {
      const std::vector<float> gpu = dequantized_layer(l, bytes.data() + layer * layer_bytes, pages, band,
                                                       num_kv_heads, from, end);
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
  const int64_t mismatches = mismatches_in(layout, arena, quantized_layer_bytes, false, begin, compared);
  std::printf("[ %s ] %lld of %lld values differ from the CPU store\n", m.name, static_cast<long long>(mismatches),
              static_cast<long long>(compared));
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
    const int64_t band_mismatches =
        mismatches_in(band_layout, to_host(band, band.size()), band_layer_bytes, true, band_from, band_compared);
    std::printf("[ %s ] band: %lld of %lld values differ from the CPU store\n", m.name,
                static_cast<long long>(band_mismatches), static_cast<long long>(band_compared));
    EXPECT_EQ(band_compared, 2 * num_layers * num_kv_heads * m.band_tokens * d);
    EXPECT_EQ(band_mismatches, 0);
  }
  if (m.key_feedback || m.value_feedback) {  // feedback changed codes: the comparison was not of nearest rounding
    args.key_feedback = nullptr;
    args.value_feedback = nullptr;
    const std::vector<std::byte> nearest = migrate();
    EXPECT_NE(std::memcmp(nearest.data(), arena.data(), arena.size()), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Formats, CudaKvMigrate,
    ::testing::Values(
        MigrateCase{"int2_g128_q8_clip_feedback", KvDtype::int2, 128, ParamFormat::q8, false, true, true},  // OSCAR's defaults
        MigrateCase{"int2_g128_q8_clip_feedback_band", KvDtype::int2, 128, ParamFormat::q8, false, true, true, 100},
        MigrateCase{"int2_g128_q8_search_feedback", KvDtype::int2, 128, ParamFormat::q8, true, true, true},
        MigrateCase{"int2_g64_q8_search_feedback", KvDtype::int2, 64, ParamFormat::q8, true, true, true},
        MigrateCase{"int2_g128_q8_search_value_feedback", KvDtype::int2, 128, ParamFormat::q8, true, false, true},
        MigrateCase{"int2_g128_q8_search", KvDtype::int2, 128, ParamFormat::q8, true, false, false},
        MigrateCase{"int2_g64_f16_clip", KvDtype::int2, 64, ParamFormat::f16, false, false, false},
        MigrateCase{"int4_g32_bf16_key_feedback", KvDtype::int4, 32, ParamFormat::bf16, false, true, false}),
    case_name<MigrateCase>);

}  // namespace
}  // namespace oscar::cuda

#endif  // OSCAR_HAVE_CUDA
