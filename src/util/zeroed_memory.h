#pragma once
// Memory that the kernel hands out zeroed, page by page, when it is first touched (an anonymous
// private mapping): a KV pool of many GiB costs neither start-up time nor resident memory until its
// pages are used, where a std::vector would write every byte up front.
#include <cstddef>
#include <string>

namespace oscar {

class ZeroedMemory {
 public:
  ZeroedMemory() = default;
  // `what` names the memory in the Error thrown when it cannot be reserved.
  ZeroedMemory(size_t bytes, const std::string& what);
  ~ZeroedMemory();
  ZeroedMemory(const ZeroedMemory&) = delete;
  ZeroedMemory& operator=(const ZeroedMemory&) = delete;
  ZeroedMemory(ZeroedMemory&& other) noexcept;
  ZeroedMemory& operator=(ZeroedMemory&& other) noexcept;

  std::byte* data() { return data_; }
  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void release();
  std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace oscar
