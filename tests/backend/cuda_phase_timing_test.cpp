// The CUDA backend's per-phase GPU timing (set_forward_phase_timing), which `oscar bench prefill`
// reads: off by default, the phases of a timed prefill step positive and within the step's
// total, the total alone when only it is asked for, a decode step replayed from a CUDA graph not
// timed. Skips without a GPU.
#include <gtest/gtest.h>

#ifdef OSCAR_HAVE_CUDA

#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "model/model_weights.h"
#include "support/kv_configs.h"
#include "support/test_paths.h"
#include "util/error.h"

namespace oscar {
namespace {

// One step of `count` tokens of a sequence, its pages reserved before and committed after.
ForwardPhaseTimes run_step(Backend& backend, KvPagePools& pools, SequencePages& pages,
                           int64_t count) {
  const std::vector<int32_t> tokens(size_t(count), 11);
  EXPECT_TRUE(pages.reserve(count, backend.kv_config(), pools));
  const SequenceStep step{tokens, &pages, false};
  StepLogits logits;
  backend.forward({&step, 1}, logits);
  pages.commit(count, backend.kv_config(), pools);
  return forward_phase_times(backend);
}

TEST(CudaPhaseTiming, TimedPrefillPhasesLieWithinTheStepAndGraphsAreNotTimed) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  static const ModelWeights weights = load_model(testing::testbed_model_dir());
  BackendOptions options;
  options.device = DeviceKind::cuda;
  options.kv = testing::small_window_int2();
  options.capacity = capacity_for_sequences(options.kv, 1024, 1, 256);
  auto backend = make_backend(weights, options);
  KvPagePools pools(backend->kv_capacity());
  SequencePages pages;

  const ForwardPhaseTimes untimed = run_step(*backend, pools, pages, 100);
  EXPECT_EQ(untimed.total_ms, 0);
  EXPECT_EQ(untimed.linear_ms, 0);

  set_forward_phase_timing(*backend, PhaseTiming::phases);
  const ForwardPhaseTimes prefill =
      run_step(*backend, pools, pages, 256);  // tokens leave the window
  EXPECT_GT(prefill.attention_ms, 0);
  EXPECT_GT(prefill.kv_write_ms, 0);
  EXPECT_GT(prefill.linear_ms, 0);
  EXPECT_LE(prefill.attention_ms + prefill.kv_write_ms + prefill.linear_ms, prefill.total_ms);
  // The quantization of the tokens leaving the window is part of the KV write, the dequantization
  // into scratch pages part of attention.
  EXPECT_GT(prefill.kv_quantize_ms, 0);
  EXPECT_LE(prefill.kv_quantize_ms, prefill.kv_write_ms);
  EXPECT_LE(prefill.dequantize_ms, prefill.attention_ms);

  // Decode steps of one sequence are replayed from a CUDA graph: nothing is recorded in it.
  for (int i = 0; i < 3; ++i) {
    const ForwardPhaseTimes decode = run_step(*backend, pools, pages, 1);
    EXPECT_EQ(decode.total_ms, 0) << "decode step " << i;
  }
  // The total alone: one pair of events around the step.
  set_forward_phase_timing(*backend, PhaseTiming::total);
  const ForwardPhaseTimes total = run_step(*backend, pools, pages, 64);
  EXPECT_GT(total.total_ms, 0);
  EXPECT_EQ(total.attention_ms + total.kv_write_ms + total.linear_ms + total.kv_quantize_ms +
                total.dequantize_ms,
            0);
  set_forward_phase_timing(*backend, PhaseTiming::off);
  EXPECT_EQ(run_step(*backend, pools, pages, 64).total_ms, 0);
  BackendOptions cpu;
  cpu.capacity = {16, 0, 0};
  EXPECT_THROW(set_forward_phase_timing(*make_backend(weights, cpu), PhaseTiming::phases), Error);
}

}  // namespace
}  // namespace oscar

#endif  // OSCAR_HAVE_CUDA
