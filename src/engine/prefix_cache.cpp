#include "engine/prefix_cache.h"

#include <algorithm>

namespace oscar {

struct PrefixCache::Node {
  Node* parent = nullptr;
  std::vector<int32_t> key;  // this page's tokens
  std::map<std::vector<int32_t>, std::unique_ptr<Node>> children;
  LogicalPage pages;
  int64_t pins = 0;
  uint64_t last_used = 0;
};

namespace {

bool overlaps(int64_t page, int64_t size, int64_t begin, int64_t end) {
  return begin < end && page * size < end && (page + 1) * size > begin;
}

// Adds (sign 1) or removes (sign -1) the pages of one node.
void count_pages(const LogicalPage& pages, int64_t sign, KvPageCounts& counts) {
  counts.full += sign * (pages.full >= 0);
  counts.quantized += sign * (pages.quantized >= 0);
  counts.band += sign * (pages.band >= 0);
}

// Calls visit(node, page) for every node below `root`, parents first; `page` is the node's page
// index in its sequences (the root's children hold page 0).
template <typename Node, typename Visit>
void for_each_node(Node& root, const Visit& visit, int64_t page = 0) {
  for (auto& [key, child] : root.children) {
    visit(*child, page);
    for_each_node(*child, visit, page + 1);
  }
}

}  // namespace

PrefixCache::PrefixCache(const KvCacheConfig& kv, KvPagePools& pools)
    : kv_(kv), pools_(pools), root_(std::make_unique<Node>()) {}

PrefixCache::~PrefixCache() {
  for_each_node(*root_, [&](Node& node, int64_t) { release_pages(node.pages); });
}

void PrefixCache::release_pages(const LogicalPage& pages) {
  if (pages.full >= 0) pools_.full.release(pages.full);
  if (pages.quantized >= 0) pools_.quantized.release(pages.quantized);
  if (pages.band >= 0) pools_.band.release(pages.band);
}

void PrefixCache::pin(Node& node) {
  if (node.pins++ == 0) count_pages(node.pages, -1, unpinned_pages_);
}

void PrefixCache::unpin(Node& node) {
  if (--node.pins == 0) count_pages(node.pages, 1, unpinned_pages_);
}

void PrefixCache::touch(Node* node) {
  for (; node != nullptr; node = node->parent) node->last_used = clock_;
}

// Can a sequence start from the first `pages` pages of `path` (sequence_tokens = pages * P)?
// Every page must hold what the decode rule reads at that length, and the quantized region must
// end on a page boundary so that no shared page is written again.
bool PrefixCache::usable(const std::vector<Node*>& path, int64_t pages,
                         int64_t sequence_tokens) const {
  const int64_t p = kv_.page_size_tokens;
  const int64_t qend = quantized_end(kv_, sequence_tokens);
  const int64_t band = band_begin(kv_, sequence_tokens);
  if (qend > kv_.sink_tokens && qend % p != 0) return false;
  for (int64_t i = 0; i < pages; ++i) {
    const LogicalPage& cached = path[size_t(i)]->pages;
    const bool full = overlaps(i, p, 0, std::min(kv_.sink_tokens, sequence_tokens)) ||
                      overlaps(i, p, qend, sequence_tokens);
    if (full && cached.full < 0) return false;
    if (overlaps(i, p, kv_.sink_tokens, qend) && cached.quantized < 0) return false;
    if (overlaps(i, p, band, qend) && cached.band < 0) return false;
  }
  return true;
}

int64_t PrefixCache::attach(std::span<const int32_t> tokens, int64_t max_tokens,
                            SequencePages& pages, Cursor& cursor) {
  const int64_t p = kv_.page_size_tokens;
  std::vector<Node*> path;
  Node* node = root_.get();
  for (int64_t i = 0; (i + 1) * p <= std::min<int64_t>(max_tokens, int64_t(tokens.size())); ++i) {
    const std::vector<int32_t> key(tokens.begin() + i * p, tokens.begin() + (i + 1) * p);
    const auto it = node->children.find(key);
    if (it == node->children.end()) break;
    node = it->second.get();
    path.push_back(node);
  }
  int64_t count = int64_t(path.size());
  while (count > 0 && !usable(path, count, count * p)) --count;
  if (count == 0) return 0;
  const int64_t attached = count * p;
  const int64_t qend = quantized_end(kv_, attached);
  const int64_t band = band_begin(kv_, attached);
  std::vector<LogicalPage> logical(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const LogicalPage& cached = path[size_t(i)]->pages;
    // Only the formats the sequence reads: a page it holds must never be one it will write.
    if (overlaps(i, p, 0, std::min(kv_.sink_tokens, attached)) || overlaps(i, p, qend, attached)) {
      pools_.full.retain(cached.full);
      logical[size_t(i)].full = cached.full;
    }
    if (overlaps(i, p, kv_.sink_tokens, qend)) {
      pools_.quantized.retain(cached.quantized);
      logical[size_t(i)].quantized = cached.quantized;
    }
    if (overlaps(i, p, band, qend)) {
      pools_.band.retain(cached.band);
      logical[size_t(i)].band = cached.band;
    }
    pin(*path[size_t(i)]);
  }
  pages.attach_prefix(std::move(logical), attached);
  path.resize(size_t(count));
  cursor.path = std::move(path);
  ++clock_;
  touch(cursor.path.back());
  return attached;
}

void PrefixCache::insert(std::span<const int32_t> tokens, const SequencePages& pages,
                         Cursor& cursor) {
  const int64_t p = kv_.page_size_tokens;
  const int64_t n = pages.num_tokens();
  if (pages.full_precision_until() > 0) return;  // a different rule: nothing to share
  const int64_t qend = quantized_end(kv_, n);
  const auto& logical = pages.pages();
  ++clock_;
  // Pages recorded earlier may have become quantized since.
  for (size_t i = 0; i < cursor.path.size(); ++i) {
    Node* node = cursor.path[i];
    const int64_t end = int64_t(i + 1) * p;
    if (qend >= end && end > kv_.sink_tokens) record_quantized(*node, logical[i]);
  }
  // New complete pages extend the path.
  Node* node = cursor.path.empty() ? root_.get() : cursor.path.back();
  for (int64_t i = int64_t(cursor.path.size()); (i + 1) * p <= n; ++i) {
    std::vector<int32_t> key(tokens.begin() + i * p, tokens.begin() + (i + 1) * p);
    auto& child = node->children[key];
    if (!child) {
      child = std::make_unique<Node>();
      child->parent = node;
      child->key = std::move(key);
    }
    node = child.get();
    pin(*node);  // before its pages grow: the pages of a pinned node are never counted unpinned
    const LogicalPage& page = logical[size_t(i)];
    if (node->pages.full < 0 && page.full >= 0) {
      pools_.full.retain(page.full);
      node->pages.full = page.full;
    }
    if (qend >= (i + 1) * p) record_quantized(*node, page);
    cursor.path.push_back(node);
  }
  if (!cursor.path.empty()) touch(cursor.path.back());
}

// A page whose tokens have all been quantized: its 2-bit page and, while it has one, its band copy
// are complete and can be shared.
void PrefixCache::record_quantized(Node& node, const LogicalPage& page) {
  if (node.pages.quantized < 0 && page.quantized >= 0) {
    pools_.quantized.retain(page.quantized);
    node.pages.quantized = page.quantized;
  }
  if (node.pages.band < 0 && page.band >= 0) {
    pools_.band.retain(page.band);
    node.pages.band = page.band;
  }
}

void PrefixCache::release(Cursor& cursor) {
  for (Node* node : cursor.path) unpin(*node);
  cursor.path.clear();
}

bool PrefixCache::evict(KvPageCounts needed) {
  return evict_leaves(needed) || drop_unshared_copies(needed);
}

bool PrefixCache::evict_leaves(KvPageCounts needed) {
  while (!pools_.can_allocate(needed)) {
    // The least recently used leaf that no sequence pins.
    Node* victim = nullptr;
    for_each_node(*root_, [&](Node& node, int64_t) {
      if (node.children.empty() && node.pins == 0 &&
          (victim == nullptr || node.last_used < victim->last_used))
        victim = &node;
    });
    if (victim == nullptr) return false;
    count_pages(victim->pages, -1, unpinned_pages_);
    release_pages(victim->pages);
    victim->parent->children.erase(victim->key);
  }
  return true;
}

// A running sequence pins its whole path, and the path keeps the full page of every page that was
// in the sequence's recent window when recorded and the band copy of every page that was in its
// band (insert), long after the sequence itself has let them go: at 32K prompts that is tens of
// band pages a sequence, where the pools hold the sequences' own pages only (capacity_for_bytes),
// and the scheduler preempted once they ran dry (docs/bench/notes/2026-11-28-mixed-steps.md). Such
// copies, held by the cache alone, go least recently used first, of the kinds the pools lack. A
// node without one is no longer where a hit may end (usable), so a later hit ends at another page;
// the sink pages' full copies stay, every hit reads them.
bool PrefixCache::drop_unshared_copies(KvPageCounts needed) {
  std::vector<std::pair<Node*, int64_t>> nodes;  // with their page index
  for_each_node(*root_, [&](Node& node, int64_t page) { nodes.emplace_back(&node, page); });
  std::stable_sort(nodes.begin(), nodes.end(), [](const auto& a, const auto& b) {
    return a.first->last_used < b.first->last_used;
  });
  auto drop = [&](Node& node, int32_t& id, PagePool& pool, int64_t& unpinned) {
    if (id < 0 || pool.ref_count(id) != 1) return;
    pool.release(id);
    id = -1;
    if (node.pins == 0) --unpinned;
  };
  for (const auto& [node, page] : nodes) {
    if (pools_.can_allocate(needed)) return true;
    if (needed.full > pools_.full.free_pages() && page * kv_.page_size_tokens >= kv_.sink_tokens) {
      drop(*node, node->pages.full, pools_.full, unpinned_pages_.full);
    }
    if (needed.band > pools_.band.free_pages()) {
      drop(*node, node->pages.band, pools_.band, unpinned_pages_.band);
    }
  }
  return pools_.can_allocate(needed);
}

void PrefixCache::evict_unpinned() {
  evict_leaves({pools_.full.capacity() + int64_t(1), pools_.quantized.capacity() + int64_t(1),
                pools_.band.capacity() + int64_t(1)});
}

int64_t PrefixCache::cached_pages() const {
  KvPageCounts counts;
  for_each_node(*root_, [&](const Node& node, int64_t) { count_pages(node.pages, 1, counts); });
  return counts.full + counts.quantized + counts.band;
}

}  // namespace oscar
