#pragma once
// The kQ8ScaleCount q8 scales (quant/group_codec.h, q8_scale) on the device, where the write path
// and the attention kernels decode q8 group parameters; and the score scale the attention kernels
// take.
#include <cmath>
#include <cstdint>
#include <numbers>
#include <vector>

#include "backend/cuda/device_buffer.h"
#include "quant/group_codec.h"

namespace oscar::cuda {

inline DeviceBuffer<float> make_q8_scale_table() {
  std::vector<float> scales(kQ8ScaleCount);
  for (int e = 0; e < kQ8ScaleCount; ++e) scales[size_t(e)] = q8_scale(e);
  DeviceBuffer<float> table;
  upload(scales, table);
  return table;
}

// 1/sqrt(D) in log2 units: the kernels take exp2 of the scores.
inline float attention_score_scale(int64_t head_dim) {
  return float(std::numbers::log2e / std::sqrt(double(head_dim)));
}

}  // namespace oscar::cuda
