// The CPU backend split over tensor-parallel ranks (parallel/shard_plan.h): the ranks run as
// threads of this process, joined by an in-process communicator, and their logits equal the
// unsharded model's for every KV format, at tp 2 (the testbed's 2 KV heads split) and tp 4
// (each KV head replicated on 2 ranks).
#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <cmath>
#include <random>

#include "backend/backend.h"
#include "backend/sequence_runner.h"
#include "model/model_fingerprint.h"
#include "parallel/in_process_communicator.h"
#include "quant/kv_rotations.h"
#include "support/host_ranks.h"
#include "support/logit_checks.h"
#include "support/test_paths.h"
#include "support/testbed.h"
#include "support/testbed_rotations.h"
#include "util/error.h"

namespace oscar {
namespace tensor_parallel_test {  // named apart: the room's tests compile as one unit
namespace {

const ModelWeights& testbed() {
  return testing::testbed_weights();
}

struct FormatCase {
  const char* name;
  KvDtype dtype;
  KvMethod method;
  int group;
  int64_t band_tokens = 0;
  // Max relative logit difference: the ranks' partial sums add in another order than the whole
  // matrix products (float32 rounding), and a bf16 or quantized cache can round such a last-bit
  // difference to another value or code (1e-4 to 1e-3 on the testbed; OSCAR's error feedback
  // carries a flipped code on along the row, up to 3e-3). A rank that read another KV head or
  // rotation would be off by far more.
  double tolerance = 3e-3;
};

BackendOptions options_for(const FormatCase& f) {
  BackendOptions options;
  options.kv = testing::testbed_test_kv(f.dtype, f.method, f.group, f.band_tokens, 8, 24);
  options.capacity = {64, 64, f.band_tokens > 0 ? 64 : 0};
  return options;
}

// Every rank's logits of the whole sequence, each rank a thread with its own shard.
std::vector<std::vector<float>> run_ranks(const BackendOptions& options, int tensor_parallel_size,
                                          const std::vector<int32_t>& tokens) {
  std::vector<std::vector<float>> logits(static_cast<size_t>(tensor_parallel_size));
  const std::vector<std::string> errors =
      testing::run_host_ranks(tensor_parallel_size, [&](Communicator& communicator, int rank) {
        BackendOptions rank_options = options;
        rank_options.communicator = &communicator;
        const auto backend = make_backend(testbed(), rank_options);
        logits[size_t(rank)] =
            run_sequence(*backend, tokens, {.chunk_tokens = 29, .all_logits = true});
      });
  for (int rank = 0; rank < tensor_parallel_size; ++rank) {
    EXPECT_EQ(errors[size_t(rank)], "") << "rank " << rank;
  }
  return logits;
}

class CpuTensorParallel : public ::testing::TestWithParam<FormatCase> {};

TEST_P(CpuTensorParallel, ShardsGiveTheUnshardedLogits) {
  const FormatCase f = GetParam();
  const BackendOptions options = options_for(f);
  // Past sink + window + band (56 tokens): every quantized format writes and reads 2-bit codes.
  const auto tokens = testing::validation_byte_tokens(72);
  const auto reference = run_sequence(*make_backend(testbed(), options), tokens,
                                      {.chunk_tokens = 29, .all_logits = true});
  for (const int tp : {2, 4}) {
    const auto ranks = run_ranks(options, tp, tokens);
    const double difference = testing::max_relative_difference(reference, ranks[0]);
    EXPECT_LT(difference, f.tolerance) << f.name << " tp " << tp;
    std::printf("%s tp %d: max relative logit difference %.3g\n", f.name, tp, difference);
    for (int rank = 1; rank < tp; ++rank) {
      EXPECT_EQ(ranks[size_t(rank)], ranks[0]) << f.name << " tp " << tp << " rank " << rank;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Formats, CpuTensorParallel,
    ::testing::Values(FormatCase{"f32", KvDtype::f32, KvMethod::naive, 128, 0, 1e-5},
                      FormatCase{"bf16", KvDtype::bf16, KvMethod::naive, 128},
                      FormatCase{"int2_naive", KvDtype::int2, KvMethod::naive, 64},
                      FormatCase{"int2_quarot", KvDtype::int2, KvMethod::quarot, 128},
                      FormatCase{"int2_kivi", KvDtype::int2, KvMethod::kivi, 32},
                      FormatCase{"int4_quarot", KvDtype::int4, KvMethod::quarot, 64},
                      FormatCase{"int2_quarot_band", KvDtype::int2, KvMethod::quarot, 64, 24},
                      FormatCase{"int2_oscar_band", KvDtype::int2, KvMethod::oscar, 128, 24, 1e-2}),
    [](const auto& case_info) { return std::string(case_info.param.name); });

// A tp that does not divide the heads is refused when the rank's backend is built, before any
// collective, with the field at fault.
TEST(CpuTensorParallel, SplitThatDoesNotDivideTheHeadsFails) {
  BackendOptions options;
  options.kv.dtype = KvDtype::f32;
  options.capacity = {8, 0};
  InProcessGroup group(3);
  const auto communicator = group.communicator(0);
  options.communicator = communicator.get();
  try {
    make_backend(testbed(), options);
    FAIL() << "tp 3 split the testbed's 8 heads";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("num_attention_heads (8)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tensor_parallel_test
}  // namespace oscar
