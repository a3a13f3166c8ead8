// oscar eval attn-error: per-layer attention logit and output error of each KV method vs bf16.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <map>

#include "backend/backend.h"
#include "cli/commands.h"
#include "cli/eval_common.h"
#include "cli/run_record.h"
#include "eval/attention_error.h"
#include "eval/svg_plot.h"
#include "model/model_fingerprint.h"
#include "model/value_error_feedback.h"
#include "quant/kv_rotations.h"
#include "quant/published_rotations.h"
#include "tokenizer/corpus.h"
#include "util/error.h"
#include "util/file_io.h"

namespace oscar::cli {
namespace {

struct EvalAttentionErrorOptions {
  ModelOptions model;
  std::string text_path;
  int64_t tokens = 1024;
  std::vector<int> group_sizes = {64, 128};
  std::string json_path;
  std::string figure_path;
};

void run_eval_attention_error(const EvalAttentionErrorOptions& o) {
  require_one_rank(o.model.tensor_parallel, "oscar eval attn-error",
                   "(it reads every layer's attention inputs, which a rank holds only part of)");
  ModelOptions reference_options = o.model;
  reference_options.kv_dtype = "f32";
  reference_options.kv_method = "naive";
  reference_options.kv_rotations.clear();
  reference_options.kv_rotations_k.clear();
  reference_options.kv_rotations_v.clear();
  reference_options.kv_preset.reset();
  reference_options.device = "cpu";
  const ModelSession session = open_model(reference_options);
  const ModelConfig& model = session.weights.config;
  // OSCAR's rows need rotations: --kv-rotations, else the model's own file where there is one.
  std::string rotations_path = o.model.kv_rotations;
  if (rotations_path.empty() && file_exists(default_rotations_path(session.model_dir))) {
    rotations_path = default_rotations_path(session.model_dir);
  }
  std::optional<KvRotations> oscar;
  if (!o.model.kv_rotations_k.empty()) {
    oscar =
        load_checked_published_rotations(session, o.model.kv_rotations_k, o.model.kv_rotations_v);
  } else if (rotations_path.empty()) {
    fmt::print(stderr, "[oscar] no OSCAR rows: {} has no rotations (make them with: {})\n",
               session.model_dir, calibrate_command(session.model_dir));
  } else {
    check_rotations_file(session, rotations_path);
    oscar = load_kv_rotations(rotations_path, model_fingerprint(session.weights));
  }
  std::vector<AttentionErrorMethod> methods;
  KvCacheConfig bf16;
  methods.push_back({"bf16", bf16, nullptr});
  for (const int group : o.group_sizes) {
    for (const KvMethod method :
         {KvMethod::naive, KvMethod::quarot, KvMethod::kivi, KvMethod::oscar}) {
      if (method == KvMethod::oscar && !oscar) continue;
      KvCacheConfig kv;
      kv.dtype = KvDtype::int2;
      kv.method = method;
      kv.group_size = group;
      apply_quantization_options(o.model, kv);
      methods.push_back({fmt::format("{} g{}", to_string(method), group), kv,
                         oscar ? &*oscar : nullptr,
                         kv.value_error_feedback ? value_feedback_factors(session.weights, *oscar)
                                                 : std::vector<float>{}});
    }
  }
  BackendOptions backend_options;
  backend_options.kv = session.kv;
  backend_options.capacity = capacity_for_sequences(session.kv, o.tokens, 1, 512);
  auto backend = make_backend(session.weights, backend_options);
  const int32_t separator = session.eos_token_ids.empty() ? 0 : session.eos_token_ids.front();
  const auto tokens = tokenize_documents(*session.tokenizer, evaluation_documents(o.text_path),
                                         separator, o.tokens);
  require(int64_t(tokens.size()) == o.tokens, "the text has only {} tokens", tokens.size());
  const auto errors = evaluate_attention_error(*backend, tokens, methods);

  GroupedBars bars;
  bars.title = "Attention output error vs full precision (INT2, no sink/window)";
  bars.value_axis = "relative error";
  bars.log_scale = true;
  for (int64_t layer = 0; layer < model.num_layers; ++layer)
    bars.groups.push_back(fmt::format("L{}", layer));
  std::map<std::string, size_t> series_index;
  fmt::print("| method | layer | logit error | output error |\n|---|---|---|---|\n");
  nlohmann::json rows = nlohmann::json::array();
  for (const LayerAttentionError& e : errors) {
    fmt::print("| {} | {} | {:.4f} | {:.4f} |\n", e.method, e.layer, e.logits, e.outputs);
    rows.push_back(
        {{"method", e.method}, {"layer", e.layer}, {"logits", e.logits}, {"outputs", e.outputs}});
    if (!series_index.count(e.method)) {
      series_index[e.method] = bars.series.size();
      bars.series.push_back(e.method);
      bars.values.emplace_back(size_t(model.num_layers), 0.0);
    }
    bars.values[series_index[e.method]][size_t(e.layer)] = e.outputs;
  }
  write_report(o.json_path, with_run_record({{"tokens", o.tokens}, {"rows", rows}}).dump(2) + "\n");
  write_report(o.figure_path, grouped_bars_svg(bars));
}

}  // namespace

void register_eval_attention_error(CLI::App& eval) {
  auto options = std::make_shared<EvalAttentionErrorOptions>();
  CLI::App* command =
      eval.add_subcommand("attn-error", "Per-layer attention error of every KV method");
  add_model_options(*command, options->model);
  command->add_option("--text", options->text_path, "text (default: testbed valid.xz)");
  command->add_option("--tokens", options->tokens, "tokens of text to record")
      ->capture_default_str();
  command->add_option("--group-sizes", options->group_sizes)->capture_default_str();
  command->add_option("--output", options->json_path, "write the JSON report here");
  command->add_option("--figure", options->figure_path,
                      "write the per-layer error bars (SVG) here");
  command->callback([options] { run_eval_attention_error(*options); });
}

}  // namespace oscar::cli
