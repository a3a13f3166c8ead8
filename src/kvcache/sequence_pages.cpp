#include "kvcache/sequence_pages.h"

#include <algorithm>

#include "util/error.h"

namespace oscar {
namespace {

// Does logical page `page` (size P) hold a position in [begin, end)?
bool page_overlaps(int64_t page, int64_t page_size, int64_t begin, int64_t end) {
  return begin < end && page * page_size < end && (page + 1) * page_size > begin;
}

int64_t pages_for(int64_t tokens, int64_t page_size) {
  return (tokens + page_size - 1) / page_size;
}

}  // namespace

bool SequencePages::needs_full(int64_t page, int64_t num_tokens, const KvCacheConfig& c) const {
  const int64_t sink = std::min(c.sink_tokens, num_tokens);
  const int64_t qend = quantized_end(c, num_tokens, full_precision_until_);
  return page_overlaps(page, c.page_size_tokens, 0, sink) ||
         page_overlaps(page, c.page_size_tokens, qend, num_tokens);
}

bool SequencePages::needs_quantized(int64_t page, int64_t num_tokens,
                                    const KvCacheConfig& c) const {
  const int64_t qend = quantized_end(c, num_tokens, full_precision_until_);
  return page_overlaps(page, c.page_size_tokens, c.sink_tokens, qend);
}

bool SequencePages::needs_band(int64_t page, int64_t num_tokens, const KvCacheConfig& c) const {
  return page_overlaps(page, c.page_size_tokens, band_begin(c, num_tokens, full_precision_until_),
                       quantized_end(c, num_tokens, full_precision_until_));
}

// During the step a page is read in full precision for new tokens and for tokens that leave the
// window now (they are quantized from their full pages).
bool SequencePages::full_during_step(int64_t page, int64_t count, const KvCacheConfig& c) const {
  const int64_t after = num_tokens_ + count;
  return page_overlaps(page, c.page_size_tokens, 0, std::min(c.sink_tokens, after)) ||
         page_overlaps(page, c.page_size_tokens,
                       quantized_end(c, num_tokens_, full_precision_until_), after);
}

bool SequencePages::band_during_step(int64_t page, int64_t count, const KvCacheConfig& c) const {
  const int64_t after = num_tokens_ + count;
  return c.has_band() &&
         page_overlaps(page, c.page_size_tokens,
                       band_step_begin(c, num_tokens_, after, full_precision_until_),
                       quantized_end(c, after, full_precision_until_));
}

KvPageCounts SequencePages::pages_needed(int64_t count, const KvCacheConfig& c) const {
  KvPageCounts needed;
  const int64_t after = num_tokens_ + count;
  for (int64_t p = 0; p < pages_for(after, c.page_size_tokens); ++p) {
    const LogicalPage current = p < int64_t(pages_.size()) ? pages_[size_t(p)] : LogicalPage{};
    if (full_during_step(p, count, c) && current.full < 0) ++needed.full;
    if (needs_quantized(p, after, c) && current.quantized < 0) ++needed.quantized;
    if (band_during_step(p, count, c) && current.band < 0) ++needed.band;
  }
  return needed;
}

bool SequencePages::reserve(int64_t count, const KvCacheConfig& c, KvPagePools& pools) {
  require(count >= 0, "cannot reserve {} tokens", count);
  if (!pools.can_allocate(pages_needed(count, c))) return false;
  const int64_t after = num_tokens_ + count;
  pages_.resize(
      size_t(std::max<int64_t>(int64_t(pages_.size()), pages_for(after, c.page_size_tokens))));
  for (int64_t p = 0; p < int64_t(pages_.size()); ++p) {
    LogicalPage& page = pages_[size_t(p)];
    if (full_during_step(p, count, c) && page.full < 0) page.full = *pools.full.allocate();
    if (needs_quantized(p, after, c) && page.quantized < 0)
      page.quantized = *pools.quantized.allocate();
    if (band_during_step(p, count, c) && page.band < 0) page.band = *pools.band.allocate();
  }
  return true;
}

void SequencePages::commit(int64_t count, const KvCacheConfig& c, KvPagePools& pools) {
  num_tokens_ += count;
  for (int64_t p = 0; p < int64_t(pages_.size()); ++p) {
    LogicalPage& page = pages_[size_t(p)];
    if (page.full >= 0 && !needs_full(p, num_tokens_, c)) {
      pools.full.release(page.full);
      page.full = -1;
    }
    if (page.band >= 0 && !needs_band(p, num_tokens_, c)) {
      pools.band.release(page.band);
      page.band = -1;
    }
  }
}

void SequencePages::attach_prefix(std::vector<LogicalPage> pages, int64_t num_tokens) {
  require(pages_.empty() && num_tokens_ == 0, "attach_prefix: the sequence already holds pages");
  pages_ = std::move(pages);
  num_tokens_ = num_tokens;
}

void SequencePages::release_all(KvPagePools& pools) {
  for (LogicalPage& page : pages_) {
    if (page.full >= 0) pools.full.release(page.full);
    if (page.quantized >= 0) pools.quantized.release(page.quantized);
    if (page.band >= 0) pools.band.release(page.band);
  }
  pages_.clear();
  num_tokens_ = 0;
}

}  // namespace oscar
