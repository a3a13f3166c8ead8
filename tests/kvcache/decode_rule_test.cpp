// quantized_end(): which tokens are read quantized, for every method and both prefill modes.
#include <gtest/gtest.h>

#include "kvcache/kv_cache_config.h"
#include "util/error.h"

namespace oscar {
namespace {

KvCacheConfig int2(KvMethod method, int group = 64) {
  KvCacheConfig c;
  c.dtype = KvDtype::int2;
  c.method = method;
  c.group_size = group;
  c.sink_tokens = 64;
  c.recent_tokens = 256;
  c.page_size_tokens = 128;
  c.rotations_path = "unused";
  return c;
}

struct RuleCase {
  const char* name;
  KvCacheConfig config;
  int64_t num_tokens;
  int64_t full_precision_until;
  int64_t expected;
};

TEST(QuantizedEnd, Table) {
  KvCacheConfig bf16;
  const RuleCase cases[] = {
      {"bf16 never quantizes", bf16, 100000, 0, 64},
      {"short sequence", int2(KvMethod::oscar), 10, 0, 64},
      {"window exactly full", int2(KvMethod::oscar), 320, 0, 64},
      {"first token leaves", int2(KvMethod::oscar), 321, 0, 65},
      {"long", int2(KvMethod::naive), 1000, 0, 744},
      {"kivi group not complete", int2(KvMethod::kivi), 383, 0, 64},
      {"kivi first group (sink part kept)", int2(KvMethod::kivi), 384, 0, 128},
      {"kivi long", int2(KvMethod::kivi), 1000, 0, 704},
      {"prefill in full precision", int2(KvMethod::oscar), 500, 500, 64},
      {"first decode after it", int2(KvMethod::oscar), 501, 500, 245},
  };
  for (const RuleCase& c : cases) {
    EXPECT_EQ(quantized_end(c.config, c.num_tokens, c.full_precision_until), c.expected) << c.name;
  }
}

TEST(QuantizedEnd, NeverDecreasesAndKeepsTheWindow) {
  for (const KvMethod method : {KvMethod::naive, KvMethod::kivi}) {
    const KvCacheConfig c = int2(method);
    int64_t previous = 0;
    for (int64_t n = 1; n < 3000; ++n) {
      const int64_t end = quantized_end(c, n);
      EXPECT_GE(end, previous);
      EXPECT_GE(end, c.sink_tokens);
      EXPECT_LE(end,
                std::max(c.sink_tokens, n - c.recent_tokens));  // the window stays full precision
      previous = end;
    }
  }
}

TEST(KvCacheConfig, ValidationNamesTheFlag) {
  KvCacheConfig c = int2(KvMethod::kivi, 128);
  c.page_size_tokens = 64;
  try {
    validate(c, 128);
    FAIL() << "accepted a KIVI page smaller than its group";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("--kv-page-size"), std::string::npos);
  }
  KvCacheConfig odd = int2(KvMethod::naive, 48);
  EXPECT_THROW(validate(odd, 128), Error);
  KvCacheConfig no_file = int2(KvMethod::oscar);
  no_file.rotations_path.clear();
  EXPECT_THROW(validate(no_file, 128), Error);
  EXPECT_THROW(parse_kv_dtype("int3"), Error);
  EXPECT_EQ(parse_kv_method("quarot"), KvMethod::quarot);
}

}  // namespace
}  // namespace oscar
