// The layer kernels against their CPU references on random (never zero) inputs; skips without a
// GPU. Tolerances, as ||gpu - ref|| / ||ref|| (support/cuda_test_support.h):
//   q/k norm + RoPE and the KV write's rotation 1e-5 against cpu_math / rope (its bf16 keys and
//     values 4e-3); RMSNorm and SwiGLU 4e-3 (their outputs are bf16, the next product's input);
//   bf16 matrix products (float accumulation, float output; skinny_linear and cuBLAS): 1e-5 against
//     float64 products of the same bf16 inputs.
#include <gtest/gtest.h>

#ifdef OSCAR_HAVE_CUDA

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "backend/cpu/cpu_math.h"
#include "backend/cuda/gate_up_layout.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/layer_kernels.h"
#include "backend/cuda/query_rotation_tiles.h"
#include "backend/cuda/step_plan.h"
#include "support/cuda_test_support.h"
#include "util/error.h"

namespace oscar::cuda {
namespace {

// Widths of the testbed (512), Qwen3-8B (4096) and Qwen3-32B (5120, not a multiple of the block's
// 1024 floats per pass); the last case reads its rows through a row map, as the final norm does.
TEST_F(CudaKernels, AddRmsNormMatchesCpu) {
  for (const int64_t width : {512, 4096, 5120}) {
    const int64_t rows = 5;
    auto hidden = random_floats(size_t(rows * width), 1),
         delta = random_floats(size_t(rows * width), 2);
    const auto weight = random_floats(size_t(width), 3, 0.5f, 1.5f);
    auto d_hidden = to_device(hidden);
    const auto d_delta = to_device(delta), d_weight = to_device(weight);
    const std::vector<int32_t> row_map = {3, 0};
    const auto d_row_map = to_device(row_map);
    const bool mapped = width == 5120;
    const int64_t out_rows = mapped ? int64_t(row_map.size()) : rows;
    DeviceBuffer<__nv_bfloat16> out(size_t(out_rows * width));
    launch_add_rms_norm(d_hidden.data(), d_delta.data(), mapped ? d_row_map.data() : nullptr,
                        out_rows, width, d_weight.data(), 1e-6f, out.data(), nullptr);
    std::vector<float> normed(hidden.size());
    for (int64_t r = 0; r < out_rows; ++r) {
      const int64_t source = mapped ? row_map[size_t(r)] : r;
      for (int64_t i = 0; i < width; ++i)
        hidden[size_t(source * width + i)] += delta[size_t(source * width + i)];
      rms_norm(&hidden[size_t(source * width)], 1, width, weight.data(), 1e-6,
               &normed[size_t(r * width)]);
    }
    normed.resize(size_t(out_rows * width));
    const std::vector<uint16_t> bits = bf16_bits(out, normed.size());
    EXPECT_LE(relative_error(widen(hidden), to_host(d_hidden, hidden.size())), 1e-6)
        << "width " << width;
    EXPECT_LE(relative_error(widen(normed), floats_of_bf16(bits)), 4e-3)
        << "width " << width;  // bf16 output
  }
}

// The gate|up product's columns interleaved as gate_up_layout.h orders them.
TEST_F(CudaKernels, SwigluMatchesCpu) {
  const int64_t rows = 3, inner = 3000;
  const auto gate_up = random_floats(size_t(rows * 2 * inner), 4, -4.f, 4.f);
  std::vector<float> gate(size_t(rows * inner)), up(size_t(rows * inner)),
      expected(size_t(rows * inner));
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
      const auto x = random_bf16(size_t(rows * inputs), 5),
                 w = random_bf16(size_t(outputs * inputs), 6, -0.05f, 0.05f);
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
      EXPECT_LE(relative_error(expected, to_host(y, expected.size())), 1e-5)
          << rows << " x " << inputs;  // float sums
      gemm.linear(xs, rows, ws, outputs, inputs, y.data(), /*accumulate=*/true);
      for (double& e : expected) e *= 2;
      EXPECT_LE(relative_error(expected, to_host(y, expected.size())), 1e-5)
          << rows << " x " << inputs << ", accumulated";
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
    const auto x = random_bf16(size_t(rows * inputs), 15),
               w = random_bf16(size_t(outputs * inputs), 16, -0.05f, 0.05f);
    std::vector<float> gate(size_t(rows * inner)), up(size_t(rows * inner)),
        expected(size_t(rows * inner));
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

// The prefill kernel's R_K (host side, no GPU): for each head the transpose, its bf16 high part
// and the bf16 rounding of the rest, which together hold each entry to 2^-16 of it; a size that is
// not whole rotations is refused.
TEST(QueryRotationTiles, HighAndLowPartsHoldTheTranspose) {
  const int64_t d = 128, heads = 2;
  const auto rotations = random_floats(size_t(heads * d * d), 14, -0.3f, 0.3f);
  const auto tiles = query_rotation_tiles(rotations, d);
  ASSERT_EQ(tiles.size(), size_t(heads * 2 * d * d));
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t n = 0; n < d; ++n) {
      for (int64_t k = 0; k < d; ++k) {
        const float r = rotations[size_t((h * d + k) * d + n)];
        const size_t at = size_t(h * 2 * d * d + n * d + k);
        const float high = bf16_to_float(tiles[at]), low = bf16_to_float(tiles[at + size_t(d * d)]);
        EXPECT_EQ(high, round_to_bf16(r));
        EXPECT_LE(std::abs(double(high) + double(low) - double(r)), std::abs(double(r)) * 0x1p-16)
            << "head " << h << ", R[" << k << "][" << n << "]";
      }
    }
  }
  EXPECT_THROW(query_rotation_tiles(std::vector<float>(100), d), Error);
}

// q/k norm + RoPE, then the KV write, of 3, 21, 75 and 4000 rows (positions 1, 68, 40007, then
// spread to 60K; a decode step's tiles of 8 rows, a prefill chunk's copy and rotated tiles, and
// enough tiles that each resident block of a KV head takes several) with and without q/k norm
// weights and a key rotation: the q and k parts of the rows normed and rotary-embedded in place as
// on the CPU, the v part untouched, the queries rotated by R_K, the keys rotated and the values as
// bf16 in each row's page slot.
TEST_F(CudaKernels, QkNormRopeAndKvWriteMatchCpu) {
  const int heads = 8, kv_heads = 2, d = 128, group = heads / kv_heads;
  const int64_t stride = (heads + 2 * kv_heads) * d;
  KvCacheConfig kv;
  kv.page_size_tokens = 64;
  const PageLayout layout = make_page_layout(kv, kv_heads, d);
  for (const auto& [rows, norms_and_rotation] : {std::pair<int64_t, bool>{3, true},
                                                 {3, false},
                                                 {21, true},
                                                 {75, true},
                                                 {75, false},
                                                 {4000, true}}) {
    const auto qkv = random_floats(size_t(rows * stride), 7, -3.f, 3.f);
    const auto q_norm = random_floats(size_t(d), 8, 0.5f, 1.5f),
               k_norm = random_floats(size_t(d), 9, 0.5f, 1.5f);
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
        if (norms_and_rotation)
          rms_norm(x, 1, d, h < heads ? q_norm.data() : k_norm.data(), 1e-6, x);
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
        for (int i = 0; i < d; ++i)
          sum += double(x[i]) * rotation[size_t((kv_head * d + i) * d + j)];
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
    const auto d_q_norm = to_device(q_norm), d_k_norm = to_device(k_norm),
               d_inverse = to_device(inverse);
    const auto d_rotation = to_device(rotation);
    const auto d_rows = to_device(row_records);
    const auto d_page_table = to_device(page_table);
    DeviceBuffer<std::byte> pages(size_t(rows * layout.full_page_bytes));
    DeviceBuffer<float> rotated_queries(size_t(rows * heads * d));
    QkNormRopeArgs rope{d_qkv.data(),
                        stride,
                        heads,
                        kv_heads,
                        d,
                        d_rows.data(),
                        norms_and_rotation ? d_q_norm.data() : nullptr,
                        norms_and_rotation ? d_k_norm.data() : nullptr,
                        1e-6f,
                        d_inverse.data()};
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
    EXPECT_LE(relative_error(expected_queries, to_host(rotated_queries, expected_queries.size())),
              1e-5)
        << rows << " rows: rotated queries, rotation " << norms_and_rotation;
    // Each row's key and value slots, as floats.
    auto read_slots = [&](const DeviceBuffer<std::byte>& device_pages) {
      const auto page_bytes = to_host(device_pages, device_pages.size());
      std::pair<std::vector<float>, std::vector<float>> slots;
      for (int64_t r = 0; r < rows; ++r) {
        const std::byte* page = page_bytes.data() + (rows - 1 - r) * layout.full_page_bytes;
        const int64_t slot = positions[size_t(r)] % 64;
        for (int h = 0; h < kv_heads; ++h) {
          for (const bool key : {true, false}) {
            const auto* bits = reinterpret_cast<const uint16_t*>(
                page + (key ? layout.full_key_offset(h, slot) : layout.full_value_offset(h, slot)));
            for (int j = 0; j < d; ++j)
              (key ? slots.first : slots.second).push_back(bf16_to_float(bits[j]));
          }
        }
      }
      return slots;
    };
    const auto [keys, values] = read_slots(pages);
    EXPECT_LE(relative_error(expected_keys, keys), 4e-3)
        << rows << " rows: keys, rotation " << norms_and_rotation;
    EXPECT_LE(relative_error(expected_values, values), 4e-3) << rows << " rows: values";  // bf16
    // Without the queries (a prefill step whose attention rotates them itself): the same pages,
    // and the queries' buffer untouched. Steps of at most 64 rows always write them.
    if (rows <= 64) continue;
    DeviceBuffer<std::byte> pages_alone(pages.size());
    DeviceBuffer<float> untouched(rotated_queries.size());
    ASSERT_EQ(cudaMemset(untouched.data(), 0xff, untouched.bytes()), cudaSuccess);
    args.full_pages = pages_alone.data();
    args.rotated_queries = untouched.data();
    args.write_queries = false;
    launch_kv_write(args, rows, nullptr);
    const auto [keys_alone, values_alone] = read_slots(pages_alone);
    EXPECT_EQ(keys_alone, keys) << rows << " rows: keys without the queries";
    EXPECT_EQ(values_alone, values) << rows << " rows: values without the queries";
    const auto queries_after = to_host(untouched, untouched.size());
    EXPECT_TRUE(std::all_of(queries_after.begin(), queries_after.end(),
                            [](float x) { return std::isnan(x); }))
        << rows << " rows: the queries were written";
  }
}

}  // namespace
}  // namespace oscar::cuda

#endif  // OSCAR_HAVE_CUDA
