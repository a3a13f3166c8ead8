#pragma once
// Helpers of the CUDA kernel tests (tests/backend/cuda_kernels_test.cpp, cuda_attention_test.cpp,
// cuda_kv_migrate_test.cpp): random, never zero, inputs; copies to and from the device; bf16 bit
// patterns; the relative error ||gpu - ref|| / ||ref|| the tests bound; fixtures that skip without
// a GPU. Included only where OSCAR_HAVE_CUDA is defined.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_buffer.h"
#include "util/half.h"

namespace oscar::cuda {

inline std::vector<float> random_floats(size_t count, uint32_t seed, float lo = -1.f,
                                        float hi = 1.f) {
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
  check(cudaMemcpy(device.data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
        "test upload");
  return device;
}

template <typename T>
std::vector<T> to_host(const DeviceBuffer<T>& device, size_t count) {
  std::vector<T> host(count);
  check(cudaDeviceSynchronize(), "test synchronize");
  check(cudaMemcpy(host.data(), device.data(), count * sizeof(T), cudaMemcpyDeviceToHost),
        "test download");
  return host;
}

// bf16 bit patterns of random_floats' values.
inline std::vector<uint16_t> random_bf16(size_t count, uint32_t seed, float lo = -1.f,
                                         float hi = 1.f) {
  const std::vector<float> values = random_floats(count, seed, lo, hi);
  std::vector<uint16_t> bits(count);
  for (size_t i = 0; i < count; ++i) bits[i] = float_to_bf16(values[i]);
  return bits;
}

// A device bf16 array's first `count` bit patterns.
inline std::vector<uint16_t> bf16_bits(const DeviceBuffer<__nv_bfloat16>& device, size_t count) {
  std::vector<uint16_t> bits(count);
  check(cudaDeviceSynchronize(), "test synchronize");
  check(cudaMemcpy(bits.data(), device.data(), count * 2, cudaMemcpyDeviceToHost), "test download");
  return bits;
}

inline std::vector<float> floats_of_bf16(const std::vector<uint16_t>& bits) {
  std::vector<float> out(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) out[i] = bf16_to_float(bits[i]);
  return out;
}

inline double relative_error(const std::vector<double>& reference,
                             const std::vector<float>& actual) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < reference.size(); ++i) {
    if (!std::isfinite(actual[i])) return INFINITY;
    diff += (reference[i] - actual[i]) * (reference[i] - actual[i]);
    norm += reference[i] * reference[i];
  }
  return std::sqrt(diff / norm);
}

inline std::vector<double> widen(const std::vector<float>& values) {
  return {values.begin(), values.end()};
}

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

}  // namespace oscar::cuda
