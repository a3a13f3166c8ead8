#pragma once
// KV cache configurations shared by the tests of several rooms.
#include "kvcache/kv_cache_config.h"

namespace oscar::testing {

// INT2 with a small full-precision sink and window, so that short requests reach quantized pages.
inline KvCacheConfig small_window_int2() {
  KvCacheConfig kv;
  kv.dtype = KvDtype::int2;
  kv.method = KvMethod::quarot;
  kv.sink_tokens = 8;
  kv.recent_tokens = 24;
  kv.page_size_tokens = 16;
  return kv;
}

}  // namespace oscar::testing
