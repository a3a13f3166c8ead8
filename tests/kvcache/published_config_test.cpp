// The published serving configuration (--kv-preset oscar-published) and the rules that keep the
// published quantizer's options to the combinations they are defined for.
#include <gtest/gtest.h>

#include <string>

#include "kvcache/page_layout.h"
#include "util/error.h"

namespace oscar {
namespace {

TEST(PublishedConfig, IsThePaperServingConfiguration) {
  KvCacheConfig c = oscar_published_config();
  c.rotations_path = "rotations.safetensors";
  EXPECT_NO_THROW(validate(c, 128));
  EXPECT_EQ(describe(c),
            "int2 oscar g128 f32 clip 0.96/0.92 row-quantile sink 64 recent 256 page 64");
  // 2 bits + 8 bytes of f32 scale and zero per 128 channels = 2.5 bits, plus the bf16 regions'
  // 320 of 131072 tokens.
  const PageLayout layout = make_page_layout(c, 8, 128);
  EXPECT_EQ(layout.param_bytes, 8);
  const int64_t tokens = 128 * 1024;
  EXPECT_NEAR(bits_per_element(layout, footprint_for_tokens(c, tokens), tokens), 2.533, 0.0005);
}

struct RefusedCase {
  const char* name;
  void (*change)(KvCacheConfig&);
  const char* message;
};

TEST(PublishedConfig, OptionsOutsideTheirDefinitionAreRefused) {
  const RefusedCase cases[] = {
      {"lloyd-max after range-scale",
       [](KvCacheConfig& c) { c.clip_mode = ClipMode::range_scale, c.lloyd_max = true; },
       "--kv-lloyd-max"},
      {"lloyd-max at int4", [](KvCacheConfig& c) { c.dtype = KvDtype::int4, c.lloyd_max = true; },
       "--kv-lloyd-max"},
      {"lloyd-max with feedback",
       [](KvCacheConfig& c) { c.lloyd_max = true, c.key_error_feedback = true; },
       "--no-kv-key-error-feedback"},
      {"clip search with row-quantile", [](KvCacheConfig& c) { c.clip_search = true; },
       "--kv-clip-search"},
      {"row-quantile with kivi", [](KvCacheConfig& c) { c.method = KvMethod::kivi; },
       "--kv-method kivi"},
      {"one published file", [](KvCacheConfig& c) { c.published_key_rotations_path = "k.pt"; },
       "--kv-rotations-k and --kv-rotations-v go together"},
  };
  for (const RefusedCase& refused : cases) {
    KvCacheConfig c = oscar_published_config();
    c.rotations_path = "rotations.safetensors";
    c.page_size_tokens = 128;
    refused.change(c);
    try {
      validate(c, 128);
      ADD_FAILURE() << refused.name << ": accepted";
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find(refused.message), std::string::npos)
          << refused.name << ": " << error.what();
    }
  }
  KvCacheConfig lloyd_max = oscar_published_config();
  lloyd_max.rotations_path = "rotations.safetensors";
  lloyd_max.lloyd_max = true;
  EXPECT_NO_THROW(validate(lloyd_max, 128));
  EXPECT_EQ(parse_clip_mode("row-quantile"), ClipMode::row_quantile);
  EXPECT_THROW(parse_clip_mode("published"), Error);
  EXPECT_EQ(parse_param_format("f32"), ParamFormat::f32);
}

}  // namespace
}  // namespace oscar
