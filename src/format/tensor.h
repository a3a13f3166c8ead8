#pragma once
// A typed, shaped view of tensor bytes that live elsewhere (usually a memory-mapped file).
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace oscar {

enum class DType { f32, f16, bf16, f64, i64, i32, i16, i8, u8, boolean };

size_t dtype_size_bytes(DType dtype);
std::string_view dtype_name(DType dtype);  // the safetensors spelling: "F32", "BF16", ...
bool parse_dtype(std::string_view name, DType* dtype);

std::string shape_to_string(std::span<const int64_t> shape);

struct TensorView {
  std::string name;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  std::span<const std::byte> data;

  int64_t numel() const;
};

// Converts a floating-point tensor (f32, f16, bf16 or f64) to float32; `out` holds numel() values.
void convert_to_float(const TensorView& tensor, std::span<float> out);
std::vector<float> to_float_vector(const TensorView& tensor);
// Rows [first_row, first_row + rows) and columns [first_column, first_column + columns) of a
// floating-point matrix (shape [rows, columns...]), converted alone, row-major.
std::vector<float> to_float_block(const TensorView& matrix, int64_t first_row, int64_t rows,
                                  int64_t first_column, int64_t columns);

}  // namespace oscar
