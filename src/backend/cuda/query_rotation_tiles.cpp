#include "backend/cuda/query_rotation_tiles.h"

#include "util/error.h"
#include "util/half.h"

namespace oscar::cuda {

std::vector<uint16_t> query_rotation_tiles(const std::vector<float>& rotations, int64_t d) {
  require(d > 0 && int64_t(rotations.size()) % (d * d) == 0,
          "query rotation tiles: {} floats are not whole {}x{} rotations", rotations.size(), d, d);
  const int64_t heads = int64_t(rotations.size()) / (d * d);
  std::vector<uint16_t> tiles(size_t(heads * 2 * d * d));
  for (int64_t h = 0; h < heads; ++h) {
    const float* r = rotations.data() + h * d * d;
    uint16_t* high = tiles.data() + h * 2 * d * d;
    uint16_t* low = high + d * d;
    for (int64_t n = 0; n < d; ++n) {
      for (int64_t k = 0; k < d; ++k) {
        const float value = r[k * d + n];
        const uint16_t top = float_to_bf16(value);
        high[n * d + k] = top;
        low[n * d + k] = float_to_bf16(value - bf16_to_float(top));
      }
    }
  }
  return tiles;
}

}  // namespace oscar::cuda
