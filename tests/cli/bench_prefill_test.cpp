// `oscar bench prefill` apart from the GPU: issue 40's work count, the rows built from measured
// times, the chunks a lone prompt is fed in (as the engine schedules it), the decode rows beside
// them, and the weights' checksums that bench/prefill_peer.py compares.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "cli/bench_gpu_common.h"
#include "cli/bench_prefill_rows.h"
#include "cli/bench_prefill_schedule.h"
#include "cli/bench_weight_checksums.h"
#include "kvcache/page_layout.h"
#include "util/error.h"

namespace oscar::cli {
namespace {

TEST(BenchPrefill, WorkIsTheIssuesCount) {
  const ModelConfig qwen3_8b = hf_config("qwen3-8b");
  // Per layer: q|k|v 4096 x (4096 + 2 * 1024), o 4096 x 4096, gate, up and down 3 x 4096 x 12288.
  const MatrixParams params = matrix_params(qwen3_8b);
  EXPECT_EQ(params.layers, int64_t(36) * (4096 * 6144 + 4096 * 4096 + 3 * 4096 * 12288));
  EXPECT_EQ(params.lm_head, int64_t(151936) * 4096);
  const PrefillWork work = prefill_work(qwen3_8b, 32768, 4);
  EXPECT_DOUBLE_EQ(work.linear, 2.0 * double(params.total()) * 32768);
  EXPECT_DOUBLE_EQ(work.attention, 2.0 * 32768.0 * 32768.0 * 128 * 32 * 36);
  EXPECT_DOUBLE_EQ(work.linear_computed,
                   2.0 * double(params.layers) * 32768 + 2.0 * double(params.lm_head) * 4);
  EXPECT_DOUBLE_EQ(work.total(), work.linear + work.attention);
  // The count over a prefill time gives its TFLOP/s: 32K tokens in 1.57 s are 518.
  EXPECT_NEAR(work.total() / 1.57 / 1e12, 518, 1);
  // A tied LM head is the embedding's matrix, counted the same.
  EXPECT_EQ(matrix_params(hf_config("qwen3-0.6b")).lm_head, int64_t(151936) * 1024);
}

TEST(BenchPrefill, RowsDivideTheWorkByEachPhasesTime) {
  const ModelConfig config = hf_config("qwen3-8b");
  KvCacheConfig kv;
  kv.dtype = KvDtype::int2;
  kv.method = KvMethod::quarot;
  const PrefillRowKey key{"GPU", "qwen3-8b", kv, 16384, 8192, 2, 3, 2};
  PrefillTimes times;
  times.runs = {2.1, 2.0, 1.9};  // TTFT 2.0, their median
  times.gpu_runs = {1.65, 1.6, 1.55};
  times.phase_run = 1.7;
  times.gpu = 1.6;
  times.attention = 0.4;
  times.linear = 1.0;
  times.kv_write = 0.1;
  times.kv_quantize = 0.06;
  times.dequantize = 0.03;
  const nlohmann::json row = prefill_row(config, key, times);
  const PrefillWork work = prefill_work(config, 16384, 2);
  EXPECT_EQ(row["device"], "GPU");
  EXPECT_EQ(row["kv"], "int2");
  EXPECT_EQ(row["kv_config"], describe(kv));
  EXPECT_EQ(row["prompt_tokens"], 16384);
  EXPECT_EQ(row["chunk_tokens"], 8192);
  EXPECT_EQ(row["chunks"], 2);
  EXPECT_EQ(row["tensor_parallel_size"], 2);
  EXPECT_DOUBLE_EQ(row["tokens_per_s"].get<double>(), 8192);
  EXPECT_DOUBLE_EQ(row["attention_share"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(row["linear_share"].get<double>(), 1.0 / 1.6);
  EXPECT_NEAR(row["other_s"].get<double>(), 0.1, 1e-12);  // the parts are not subtracted again
  EXPECT_DOUBLE_EQ(row["kv_quantize_s"].get<double>(), 0.06);
  EXPECT_DOUBLE_EQ(row["dequantize_s"].get<double>(), 0.03);
  EXPECT_EQ(row["ttft_runs_s"].get<std::vector<double>>(), times.runs);
  EXPECT_EQ(row["gpu_runs_s"].get<std::vector<double>>(), times.gpu_runs);
  EXPECT_DOUBLE_EQ(row["phase_run_s"].get<double>(), 1.7);
  // Split over GPUs, the work stays the whole model's (the TFLOP/s of the GPUs together).
  EXPECT_DOUBLE_EQ(row["tflops"].get<double>(), work.total() / 2.0 / 1e12);
  EXPECT_DOUBLE_EQ(row["attention_tflops"].get<double>(), work.attention / 0.4 / 1e12);
  EXPECT_DOUBLE_EQ(row["linear_tflops"].get<double>(), work.linear_computed / 1.0 / 1e12);
  EXPECT_NE(prefill_table_line(row).find("16384"), std::string::npos);
  // Unmeasured phases give zero rates, not infinities.
  EXPECT_EQ(prefill_row(config, key, PrefillTimes{})["attention_tflops"].get<double>(), 0);
  // A lone prompt's row names no decode rows; a mixed one names them, with the same work.
  EXPECT_FALSE(row.contains("decode_batch"));
  PrefillRowKey mixed = key;
  mixed.decode_batch = 16;
  mixed.decode_context = 32768;
  const nlohmann::json mixed_row = prefill_row(config, mixed, times);
  EXPECT_EQ(mixed_row["decode_batch"], 16);
  EXPECT_EQ(mixed_row["decode_context"], 32768);
  EXPECT_EQ(mixed_row["flops"], row["flops"]);
}

TEST(BenchPrefill, ALonePromptRunsInChunksAsTheEngineSchedulesIt) {
  for (const KvCacheConfig& kv : bench_kv_configs("bf16,int2", ParamFormat::q8, "768", 128)) {
    SCOPED_TRACE(describe(kv));
    const int64_t length = 20000, chunk = 8192;
    SchedulerOptions options;
    options.max_num_seqs = 1;
    options.prefill_chunk_tokens = chunk;
    options.max_step_tokens = default_max_step_tokens(DeviceKind::cuda, chunk, 1);
    const KvPageCounts capacity = capacity_for_sequences(kv, length, 1, chunk);
    KvPagePools pools(capacity);
    std::vector<int32_t> prompt(static_cast<size_t>(length));
    std::iota(prompt.begin(), prompt.end(), 0);
    int64_t computed = 0;
    const std::vector<int64_t> chunks =
        prefill_lone_prompt(prompt, options, kv, pools, [&](const SequenceStep& step) {
          // The step's tokens follow those already cached, their pages reserved; one row of logits.
          EXPECT_EQ(step.kv->num_tokens(), computed);
          EXPECT_EQ(step.tokens.front(), prompt[size_t(computed)]);
          EXPECT_FALSE(step.all_logits);
          EXPECT_GE(int64_t(step.kv->pages().size()) * kv.page_size_tokens,
                    computed + int64_t(step.tokens.size()));
          computed += int64_t(step.tokens.size());
        });
    EXPECT_EQ(chunks, (std::vector<int64_t>{8192, 8192, 3616}));
    EXPECT_EQ(computed, length);
    // Every page is back for the next run.
    EXPECT_EQ(pools.full.free_pages(), capacity.full);
    EXPECT_EQ(pools.quantized.free_pages(), capacity.quantized);
    EXPECT_EQ(pools.band.free_pages(), capacity.band);
    // Pools too small for the prompt end in an error, with the pages returned.
    KvPagePools small(KvPageCounts{capacity.full / 4, capacity.quantized / 4, capacity.band});
    EXPECT_THROW(prefill_lone_prompt(prompt, options, kv, small, [](const SequenceStep&) {}),
                 Error);
    EXPECT_EQ(small.full.free_pages(), capacity.full / 4);
  }
}

TEST(BenchPrefill, DecodeRowsGrowByOneTokenInEveryChunksStep) {
  for (const KvCacheConfig& kv : bench_kv_configs("bf16,int2", ParamFormat::q8, "768", 128)) {
    SCOPED_TRACE(describe(kv));
    const int64_t length = 20000, chunk = 8192;
    const DecodeRows decodes{3, 5000};
    SchedulerOptions options;
    options.max_num_seqs = 1;
    options.prefill_chunk_tokens = chunk;
    options.max_step_tokens = default_max_step_tokens(DeviceKind::cuda, chunk, 1);
    const KvPageCounts capacity = prefill_pool_capacity(kv, length, chunk, decodes);
    KvPagePools pools(capacity);
    std::vector<int32_t> prompt(static_cast<size_t>(length));
    std::iota(prompt.begin(), prompt.end(), 0);
    int64_t computed = 0, step = 0;
    const std::vector<int64_t> chunks = prefill_beside_decodes(
        prompt, options, kv, pools, decodes, [&](std::span<const SequenceStep> steps) {
          // The decode rows first, one token each at context + step, then the chunk.
          ASSERT_EQ(int64_t(steps.size()), decodes.batch + 1);
          for (int64_t r = 0; r < decodes.batch; ++r) {
            const SequenceStep& row = steps[size_t(r)];
            EXPECT_EQ(row.tokens.size(), 1u);
            EXPECT_EQ(row.tokens.front(), kDecodeRowToken);
            EXPECT_EQ(row.kv->num_tokens(), decodes.context + step);
            EXPECT_GE(int64_t(row.kv->pages().size()) * kv.page_size_tokens,
                      decodes.context + step + 1);
            EXPECT_NE(row.kv, steps.back().kv);
          }
          EXPECT_EQ(steps.back().kv->num_tokens(), computed);
          EXPECT_EQ(steps.back().tokens.front(), prompt[size_t(computed)]);
          computed += int64_t(steps.back().tokens.size());
          ++step;
        });
    EXPECT_EQ(chunks, (std::vector<int64_t>{8192, 8192, 3616}));
    EXPECT_EQ(computed, length);
    // Every page is back for the next run.
    EXPECT_EQ(pools.full.free_pages(), capacity.full);
    EXPECT_EQ(pools.quantized.free_pages(), capacity.quantized);
    EXPECT_EQ(pools.band.free_pages(), capacity.band);
    // Pools sized for the prompt alone cannot also hold the rows: an error, the pages returned.
    const KvPageCounts alone = prefill_pool_capacity(kv, length, chunk, DecodeRows{});
    KvPagePools small(alone);
    EXPECT_THROW(prefill_beside_decodes(prompt, options, kv, small, decodes,
                                        [](std::span<const SequenceStep>) {}),
                 Error);
    EXPECT_EQ(small.full.free_pages(), alone.full);
    EXPECT_EQ(small.quantized.free_pages(), alone.quantized);
  }
}

TEST(BenchPrefill, WeightChecksumsSumTheBitPatternsAndTheirPositions) {
  // 1025 bf16 values with bit patterns 1..1025, and a second tensor of 0xffff.
  std::vector<uint16_t> embedding(1025), norm(4, 0xffff);
  std::iota(embedding.begin(), embedding.end(), uint16_t(1));
  auto view = [](const std::string& name, const std::vector<uint16_t>& bits) {
    TensorView tensor;
    tensor.name = name;
    tensor.dtype = DType::bf16;
    tensor.shape = {int64_t(bits.size())};
    tensor.data = std::as_bytes(std::span(bits));
    return tensor;
  };
  ModelWeights weights;
  weights.config.block.tie_word_embeddings = true;
  weights.embed_tokens = view("model.embed_tokens.weight", embedding);
  weights.final_norm = view("model.norm.weight", norm);
  weights.lm_head = weights.embed_tokens;
  const std::vector<TensorChecksum> checksums = weight_checksums(weights);
  ASSERT_EQ(checksums.size(), 2u);  // the tied LM head once
  EXPECT_EQ(checksums[0].name, "model.embed_tokens.weight");
  EXPECT_EQ(checksums[0].sum, 1025 * 1026 / 2);
  // Positions 0..1020 weigh i, 1021..1024 weigh 0..3: sum (i + 1) i + sum (1022 + j) j.
  int64_t weighted = 0;
  for (int64_t i = 0; i < 1021; ++i) weighted += (i + 1) * i;
  for (int64_t j = 0; j < 4; ++j) weighted += (1022 + j) * j;
  EXPECT_EQ(checksums[0].weighted_sum, weighted);
  EXPECT_EQ(checksums[1].sum, 4 * 0xffff);
  EXPECT_EQ(checksums[1].weighted_sum, 0xffff * (0 + 1 + 2 + 3));
  EXPECT_EQ(checksums_json(checksums)["model.norm.weight"],
            nlohmann::json({4 * 0xffff, 6 * 0xffff}));
  weights.final_norm.dtype = DType::f32;
  EXPECT_THROW(weight_checksums(weights), Error);
}

}  // namespace
}  // namespace oscar::cli
