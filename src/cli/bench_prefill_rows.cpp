#include "cli/bench_prefill_rows.h"

#include <fmt/format.h>

namespace oscar::cli {

MatrixParams matrix_params(const ModelConfig& c) {
  const int64_t attention =
      c.hidden_size * (c.q_dim() + 2 * c.kv_dim()) + c.q_dim() * c.hidden_size;
  const int64_t mlp = 3 * c.hidden_size * c.intermediate_size;
  return {c.num_layers * (attention + mlp), c.vocab_size * c.hidden_size};
}

PrefillWork prefill_work(const ModelConfig& c, int64_t prompt_tokens, int64_t logit_rows) {
  const MatrixParams params = matrix_params(c);
  const double tokens = double(prompt_tokens);
  PrefillWork work;
  work.linear = 2.0 * double(params.total()) * tokens;
  work.attention = 2.0 * tokens * tokens * double(c.head_dim * c.num_heads * c.num_layers);
  work.linear_computed =
      2.0 * double(params.layers) * tokens + 2.0 * double(params.lm_head) * double(logit_rows);
  return work;
}

namespace {

double ratio(double numerator, double denominator) {
  return denominator > 0 ? numerator / denominator : 0.0;
}

}  // namespace

nlohmann::json prefill_row(const ModelConfig& config, const PrefillRowKey& key,
                           const PrefillTimes& t) {
  const PrefillWork work = prefill_work(config, key.prompt_tokens, key.chunks);
  nlohmann::json row = {{"kernel", "prefill"},
                        {"device", key.device},
                        {"model", key.model},
                        {"tensor_parallel_size", key.tensor_parallel_size},
                        {"kv", std::string(to_string(key.kv.dtype))},
                        {"kv_config", describe(key.kv)},
                        {"prompt_tokens", key.prompt_tokens},
                        {"chunk_tokens", key.chunk_tokens},
                        {"chunks", key.chunks},
                        {"repeats", key.repeats},
                        {"ttft_s", t.ttft()},
                        {"ttft_runs_s", t.runs},
                        {"gpu_runs_s", t.gpu_runs},
                        {"tokens_per_s", ratio(double(key.prompt_tokens), t.ttft())},
                        {"gpu_s", t.gpu},
                        {"phase_run_s", t.phase_run},
                        {"attention_s", t.attention},
                        {"linear_s", t.linear},
                        {"kv_write_s", t.kv_write},
                        {"kv_quantize_s", t.kv_quantize},
                        {"dequantize_s", t.dequantize},
                        {"other_s", t.gpu - t.attention - t.linear - t.kv_write},
                        {"attention_share", ratio(t.attention, t.gpu)},
                        {"linear_share", ratio(t.linear, t.gpu)},
                        {"flops", work.total()},
                        {"tflops", ratio(work.total(), t.ttft()) / 1e12},
                        {"attention_flops", work.attention},
                        {"attention_tflops", ratio(work.attention, t.attention) / 1e12},
                        {"linear_flops", work.linear},
                        {"linear_flops_computed", work.linear_computed},
                        {"linear_tflops", ratio(work.linear_computed, t.linear) / 1e12}};
  if (key.decode_batch > 0) {
    row["decode_batch"] = key.decode_batch;
    row["decode_context"] = key.decode_context;
  }
  return row;
}

std::string prefill_table_header() {
  return fmt::format("{:<5} {:>7} {:>6} {:>9} {:>9} {:>6} {:>6} {:>8} {:>8} {:>8}\n", "kv",
                     "tokens", "chunk", "TTFT s", "tokens/s", "attn%", "lin%", "TFLOP/s", "attn TF",
                     "lin TF");
}

std::string prefill_table_line(const nlohmann::json& row) {
  return fmt::format(
      "{:<5} {:>7} {:>6} {:>9.3f} {:>9.0f} {:>6.1f} {:>6.1f} {:>8.1f} {:>8.1f} {:>8.1f}\n",
      row["kv"].get<std::string>(), row["prompt_tokens"].get<int64_t>(),
      row["chunk_tokens"].get<int64_t>(), row["ttft_s"].get<double>(),
      row["tokens_per_s"].get<double>(), 100 * row["attention_share"].get<double>(),
      100 * row["linear_share"].get<double>(), row["tflops"].get<double>(),
      row["attention_tflops"].get<double>(), row["linear_tflops"].get<double>());
}

}  // namespace oscar::cli
