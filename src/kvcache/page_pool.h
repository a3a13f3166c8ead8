#pragma once
// A fixed pool of page ids of one kind (full-precision or quantized) with reference counts, so
// that the prefix cache can share a page between sequences. The bytes live in the backend; the
// pool only decides which ids are in use.
#include <cstdint>
#include <optional>
#include <vector>

namespace oscar {

class PagePool {
 public:
  explicit PagePool(int32_t num_pages = 0);

  std::optional<int32_t> allocate();  // reference count 1, or nothing when the pool is empty
  void retain(int32_t page);
  void release(int32_t page);         // the page returns to the pool when its count reaches 0

  int32_t capacity() const { return int32_t(ref_counts_.size()); }
  int32_t free_pages() const { return int32_t(free_list_.size()); }
  int32_t used_pages() const { return capacity() - free_pages(); }
  int32_t ref_count(int32_t page) const;

 private:
  void check(int32_t page) const;
  std::vector<int32_t> free_list_;
  std::vector<int32_t> ref_counts_;
};

struct KvPageCounts {
  int64_t full = 0;
  int64_t quantized = 0;
};

struct KvPagePools {
  PagePool full;
  PagePool quantized;
};

}  // namespace oscar
