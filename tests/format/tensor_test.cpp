// TensorView conversions: a block of a matrix is converted alone, and a block outside is refused.
#include <gtest/gtest.h>

#include <cstring>

#include "format/tensor.h"
#include "util/error.h"
#include "util/half.h"

namespace oscar {
namespace {

TEST(TensorConversion, FloatBlockHoldsThoseRowsAndColumns) {
  // A [4, 6] bf16 matrix whose element (r, c) is r * 8 + c, exact in bf16.
  std::vector<uint16_t> bits(24);
  for (size_t i = 0; i < bits.size(); ++i) bits[i] = float_to_bf16(float(i / 6 * 8 + i % 6));
  std::vector<std::byte> bytes(bits.size() * 2);
  std::memcpy(bytes.data(), bits.data(), bytes.size());
  const TensorView matrix{"layers.0.o_proj.weight", DType::bf16, {4, 6}, bytes};
  const std::vector<float> block = to_float_block(matrix, 1, 2, 3, 2);
  EXPECT_EQ(block, (std::vector<float>{11, 12, 19, 20}));
  EXPECT_EQ(to_float_block(matrix, 0, 4, 0, 6), to_float_vector(matrix));
  try {
    to_float_block(matrix, 3, 2, 0, 1);
    FAIL() << "a block past the last row was converted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("layers.0.o_proj.weight"), std::string::npos);
  }
  EXPECT_THROW(to_float_block(matrix, 0, 1, 5, 2), Error);
}

}  // namespace
}  // namespace oscar
