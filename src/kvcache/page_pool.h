#pragma once
// A fixed pool of page ids of one kind (full-precision or quantized) with reference counts, so
// that the prefix cache can share a page between sequences. The bytes live in the backend; the
// pool only decides which ids are in use.
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace oscar {

class PagePool {
 public:
  explicit PagePool(int32_t num_pages = 0);

  std::optional<int32_t> allocate();  // reference count 1, or nothing when the pool is empty
  void retain(int32_t page);
  void release(int32_t page);  // the page returns to the pool when its count reaches 0

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
  int64_t band = 0;  // 4-bit copies behind the recent window (KvCacheConfig::band_tokens)
};

struct KvPagePools {
  PagePool full;
  PagePool quantized;
  PagePool band = PagePool(0);

  explicit KvPagePools(const KvPageCounts& capacity)
      : full(int32_t(capacity.full)),
        quantized(int32_t(capacity.quantized)),
        band(int32_t(capacity.band)) {}
  KvPagePools(PagePool full_pages, PagePool quantized_pages, PagePool band_pages = PagePool(0))
      : full(std::move(full_pages)),
        quantized(std::move(quantized_pages)),
        band(std::move(band_pages)) {}
  bool can_allocate(const KvPageCounts& needed) const {
    return needed.full <= full.free_pages() && needed.quantized <= quantized.free_pages() &&
           needed.band <= band.free_pages();
  }
};

}  // namespace oscar
