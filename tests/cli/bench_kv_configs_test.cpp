// The caches a GPU benchmark compares (bench_kv_configs, --kv-dtypes and --kv-band-tokens).
#include <gtest/gtest.h>

#include <string>

#include "cli/bench_gpu_common.h"
#include "util/error.h"

namespace oscar::cli {
namespace {

TEST(BenchKvConfigs, DtypesChooseTheCachesAndBandsMultiplyTheInt2Ones) {
  const auto both = bench_kv_configs("bf16,int2", ParamFormat::f16, "0,768", 128);
  ASSERT_EQ(both.size(), 3u);
  EXPECT_EQ(both[0].dtype, KvDtype::bf16);
  EXPECT_EQ(both[1].dtype, KvDtype::int2);
  EXPECT_EQ(both[1].band_tokens, 0);
  EXPECT_EQ(both[2].dtype, KvDtype::int2);
  EXPECT_EQ(both[2].band_tokens, 768);

  const auto int2 = bench_kv_configs("int2", ParamFormat::f16, "768", 128);
  ASSERT_EQ(int2.size(), 1u);
  EXPECT_EQ(int2[0].dtype, KvDtype::int2);
  EXPECT_EQ(int2[0].band_tokens, 768);

  const auto bf16 = bench_kv_configs("bf16", ParamFormat::f16, "0,768", 128);
  ASSERT_EQ(bf16.size(), 1u);
  EXPECT_EQ(bf16[0].dtype, KvDtype::bf16);
}

TEST(BenchKvConfigs, AnUnknownOrEmptyDtypeListIsAnErrorNamingTheFlag) {
  for (const std::string dtypes : {"int3", "bf16,fp8", ""}) {
    try {
      bench_kv_configs(dtypes, ParamFormat::f16, "0", 128);
      ADD_FAILURE() << "'" << dtypes << "' was accepted";
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find("--kv-dtypes"), std::string::npos) << error.what();
    }
  }
}

}  // namespace
}  // namespace oscar::cli
