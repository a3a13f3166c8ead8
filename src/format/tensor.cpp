#include "format/tensor.h"

#include <array>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "util/error.h"
#include "util/half.h"

namespace oscar {
namespace {

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  size_t size_bytes;
};

constexpr std::array<DTypeInfo, 10> kDTypes = {{
    {DType::f32, "F32", 4},
    {DType::f16, "F16", 2},
    {DType::bf16, "BF16", 2},
    {DType::f64, "F64", 8},
    {DType::i64, "I64", 8},
    {DType::i32, "I32", 4},
    {DType::i16, "I16", 2},
    {DType::i8, "I8", 1},
    {DType::u8, "U8", 1},
    {DType::boolean, "BOOL", 1},
}};

const DTypeInfo& info(DType dtype) {
  for (const auto& entry : kDTypes) {
    if (entry.dtype == dtype) return entry;
  }
  fail("unknown dtype {}", int(dtype));
}

template <typename Load>
void convert_elements(const TensorView& tensor, std::span<float> out, size_t element_size,
                      Load load) {
  const std::byte* bytes = tensor.data.data();
  for (size_t i = 0; i < out.size(); ++i) out[i] = load(bytes + i * element_size);
}

}  // namespace

size_t dtype_size_bytes(DType dtype) {
  return info(dtype).size_bytes;
}
std::string_view dtype_name(DType dtype) {
  return info(dtype).name;
}

bool parse_dtype(std::string_view name, DType* dtype) {
  for (const auto& entry : kDTypes) {
    if (entry.name == name) {
      *dtype = entry.dtype;
      return true;
    }
  }
  return false;
}

std::string shape_to_string(std::span<const int64_t> shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

int64_t TensorView::numel() const {
  int64_t count = 1;
  for (const int64_t dim : shape) count *= dim;
  return count;
}

void convert_to_float(const TensorView& tensor, std::span<float> out) {
  require(int64_t(out.size()) == tensor.numel(), "tensor {}: {} elements, output holds {}",
          tensor.name, tensor.numel(), out.size());
  // The view may be hand-made; never read past its bytes.
  require(tensor.data.size() == out.size() * dtype_size_bytes(tensor.dtype),
          "tensor {}: {} {} needs {} bytes, the view holds {}", tensor.name,
          dtype_name(tensor.dtype), shape_to_string(tensor.shape),
          out.size() * dtype_size_bytes(tensor.dtype), tensor.data.size());
  switch (tensor.dtype) {
    case DType::f32:
      std::memcpy(out.data(), tensor.data.data(), out.size() * sizeof(float));
      return;
    case DType::bf16:
      convert_elements(tensor, out, 2, [](const std::byte* p) {
        uint16_t bits;
        std::memcpy(&bits, p, 2);
        return bf16_to_float(bits);
      });
      return;
    case DType::f16:
      convert_elements(tensor, out, 2, [](const std::byte* p) {
        uint16_t bits;
        std::memcpy(&bits, p, 2);
        return fp16_to_float(bits);
      });
      return;
    case DType::f64:
      convert_elements(tensor, out, 8, [](const std::byte* p) {
        double value;
        std::memcpy(&value, p, 8);
        return float(value);
      });
      return;
    default:
      fail("tensor {}: dtype {} is not a floating-point type", tensor.name,
           dtype_name(tensor.dtype));
  }
}

std::vector<float> to_float_vector(const TensorView& tensor) {
  std::vector<float> out(size_t(tensor.numel()));
  convert_to_float(tensor, out);
  return out;
}

std::vector<float> to_float_block(const TensorView& matrix, int64_t first_row, int64_t rows,
                                  int64_t first_column, int64_t columns) {
  const int64_t all_rows = matrix.shape.empty() ? 0 : matrix.shape[0];
  const int64_t all_columns = all_rows == 0 ? 0 : matrix.numel() / all_rows;
  require(first_row >= 0 && rows >= 0 && first_row + rows <= all_rows && first_column >= 0 &&
              columns >= 0 && first_column + columns <= all_columns,
          "tensor {}: rows {}+{}, columns {}+{} lie outside its [{}, {}]", matrix.name, first_row,
          rows, first_column, columns, all_rows, all_columns);
  const size_t element = dtype_size_bytes(matrix.dtype);
  std::vector<float> out(size_t(rows * columns));
  TensorView piece = matrix;
  piece.shape = {columns};
  for (int64_t r = 0; r < rows; ++r) {
    piece.data = matrix.data.subspan(size_t((first_row + r) * all_columns + first_column) * element,
                                     size_t(columns) * element);
    convert_to_float(piece, std::span(out).subspan(size_t(r * columns), size_t(columns)));
  }
  return out;
}

}  // namespace oscar
