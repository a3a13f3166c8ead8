#pragma once
// Owning buffers of device memory (cudaMalloc, never managed memory) and of pinned host memory
// (for asynchronous copies), sized in elements of T.
#include <cuda_runtime.h>

#include <cstddef>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_check.h"

namespace oscar::cuda {

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t count) { resize(count); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(count_, other.count_);
    return *this;
  }
  ~DeviceBuffer() { release(); }

  // Discards the contents; a no-op when the size is unchanged.
  void resize(size_t count) {
    if (count == count_) return;
    release();
    if (count > 0)
      check(cudaMalloc(reinterpret_cast<void**>(&data_), count * sizeof(T)), "cudaMalloc");
    count_ = count;
  }
  // Grows (never shrinks) to at least `count`; returns true when the address changed.
  bool reserve(size_t count) {
    if (count <= count_) return false;
    resize(count);
    return true;
  }
  T* data() const { return data_; }
  size_t size() const { return count_; }
  size_t bytes() const { return count_ * sizeof(T); }

 private:
  void release() {
    if (data_ != nullptr) cudaFree(data_);
    data_ = nullptr;
    count_ = 0;
  }
  T* data_ = nullptr;
  size_t count_ = 0;
};

// `host` copied into `device`, resized to hold it (kept where the size is the same). The host
// elements may be the device type's bit images of the same size: bf16 as uint16_t (util/half.h).
template <typename Host, typename T>
void upload(const std::vector<Host>& host, DeviceBuffer<T>& device) {
  static_assert(sizeof(Host) == sizeof(T), "host elements are the device elements' bytes");
  device.resize(host.size());
  if (!host.empty()) {
    check(cudaMemcpy(device.data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
          "cudaMemcpy(host to device)");
  }
}

template <typename T>
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() { release(); }

  bool reserve(size_t count) {
    if (count <= count_) return false;
    release();
    check(cudaMallocHost(reinterpret_cast<void**>(&data_), count * sizeof(T)), "cudaMallocHost");
    count_ = count;
    return true;
  }
  T* data() const { return data_; }
  size_t size() const { return count_; }

 private:
  void release() {
    if (data_ != nullptr) cudaFreeHost(data_);
    data_ = nullptr;
    count_ = 0;
  }
  T* data_ = nullptr;
  size_t count_ = 0;
};

}  // namespace oscar::cuda
