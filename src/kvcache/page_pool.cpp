#include "kvcache/page_pool.h"

#include "util/error.h"

namespace oscar {

PagePool::PagePool(int32_t num_pages) : ref_counts_(size_t(num_pages), 0) {
  free_list_.reserve(size_t(num_pages));
  // Hand out low ids first (pop from the back).
  for (int32_t page = num_pages - 1; page >= 0; --page) free_list_.push_back(page);
}

std::optional<int32_t> PagePool::allocate() {
  if (free_list_.empty()) return std::nullopt;
  const int32_t page = free_list_.back();
  free_list_.pop_back();
  ref_counts_[size_t(page)] = 1;
  return page;
}

void PagePool::retain(int32_t page) {
  check(page);
  require(ref_counts_[size_t(page)] > 0, "page {} retained while free", page);
  ++ref_counts_[size_t(page)];
}

void PagePool::release(int32_t page) {
  check(page);
  require(ref_counts_[size_t(page)] > 0, "page {} released while free", page);
  if (--ref_counts_[size_t(page)] == 0) free_list_.push_back(page);
}

int32_t PagePool::ref_count(int32_t page) const {
  check(page);
  return ref_counts_[size_t(page)];
}

void PagePool::check(int32_t page) const {
  require(page >= 0 && page < capacity(), "page id {} outside the pool of {}", page, capacity());
}

}  // namespace oscar
