// bf16 / fp16 conversions against hand-checked bit patterns (PyTorch's rounding: nearest even).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>

#include "util/half.h"
#include "util/parallel.h"

namespace oscar {
namespace {

TEST(Bf16, Conversions) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16(-2.5f), 0xc020);
  EXPECT_EQ(bf16_to_float(0x4049), 3.140625f);
  // Ties go to even: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7.
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x3f808000u)), 0x3f80);
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x3f818000u)), 0x3f82);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
}

TEST(Fp16, Conversions) {
  EXPECT_EQ(float_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(float_to_fp16(-2.5f), 0xc100);
  EXPECT_EQ(float_to_fp16(65504.0f), 0x7bff);               // largest normal
  EXPECT_EQ(float_to_fp16(65519.0f), 0x7bff);               // rounds down to it
  EXPECT_EQ(float_to_fp16(65520.0f), 0x7c00);               // rounds up to infinity
  EXPECT_EQ(float_to_fp16(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(fp16_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(fp16_to_float(0x3555), 0.333251953125f);
  EXPECT_EQ(float_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie to even
  EXPECT_EQ(float_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_TRUE(std::isnan(fp16_to_float(float_to_fp16(std::nanf("")))));
  for (uint32_t bits = 0; bits < 0x7c00; bits += 7) {  // every finite positive value round-trips
    EXPECT_EQ(float_to_fp16(fp16_to_float(uint16_t(bits))), bits);
  }
}

TEST(ParallelFor, RunsEveryIndexAndRethrows) {
  std::vector<int> seen(1000, 0);
  parallel_for(0, 1000, [&](int64_t i) { seen[size_t(i)] += 1; });
  for (const int count : seen) EXPECT_EQ(count, 1);
  EXPECT_THROW(parallel_for(0, 100,
                            [](int64_t i) {
                              if (i == 37) throw std::out_of_range("index 37");
                            }),
               std::out_of_range);
}

}  // namespace
}  // namespace oscar
