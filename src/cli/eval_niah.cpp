// oscar eval niah: needle-in-a-haystack accuracy over a grid of context lengths and depths.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>

#include "cli/commands.h"
#include "cli/eval_common.h"
#include "cli/run_record.h"
#include "eval/niah.h"
#include "eval/svg_plot.h"
#include "util/error.h"

namespace oscar::cli {
namespace {

struct EvalNiahOptions {
  ModelOptions model;
  StepTokenOptions step_tokens;
  std::string text_path;
  NiahOptions niah;
  bool quantized_prefill = false;
  std::string json_path;
  std::string figure_path;
  int64_t batch = 16;
};

std::string format_name(NeedleFormat format) {
  return format == NeedleFormat::pass_key ? "pass_key" : "secret_numbers";
}

HeatMap accuracy_map(const NiahResult& result, const NiahOptions& options,
                     const std::string& title) {
  HeatMap map;
  map.title = title;
  map.row_axis = "needle depth";
  map.column_axis = "context (tokens)";
  for (const double depth : options.depths)
    map.row_labels.push_back(fmt::format("{:.0f}%", depth * 100));
  for (const int64_t context : options.context_tokens)
    map.column_labels.push_back(std::to_string(context));
  map.values.assign(options.depths.size(), std::vector<double>(options.context_tokens.size(), 0.0));
  std::map<std::pair<int64_t, double>, std::pair<int64_t, int64_t>> totals;  // both formats
  for (const NiahCell& cell : result.cells) {
    auto& [correct, total] = totals[{cell.context_tokens, cell.depth}];
    correct += cell.correct;
    total += cell.total;
  }
  for (size_t r = 0; r < options.depths.size(); ++r) {
    for (size_t c = 0; c < options.context_tokens.size(); ++c) {
      const auto& [correct, total] = totals[{options.context_tokens[c], options.depths[r]}];
      map.values[r][c] = total > 0 ? double(correct) / double(total) : 0.0;
    }
  }
  return map;
}

void run_eval_niah(EvalNiahOptions o) {
  o.niah.full_precision_prefill = !o.quantized_prefill;
  const ModelSession session = open_model(o.model);
  const auto prompts =
      build_needle_prompts(*session.tokenizer, evaluation_documents(o.text_path), o.niah);
  const int64_t longest =
      *std::max_element(o.niah.context_tokens.begin(), o.niah.context_tokens.end());
  require(longest + o.niah.answer_tokens + 64 <= session.weights.config.max_position_embeddings,
          "--contexts: {} tokens exceed the model's context of {}", longest,
          session.weights.config.max_position_embeddings);
  NiahResult result;
  // In batches, so the KV pool stays the size of `batch` sequences.
  for (size_t start = 0; start < prompts.size(); start += size_t(o.batch)) {
    const std::vector<NeedlePrompt> batch(
        prompts.begin() + long(start),
        prompts.begin() + long(std::min(prompts.size(), start + size_t(o.batch))));
    auto engine = make_eval_engine(session, o.step_tokens, o.batch, longest + 128);
    const NiahResult part = evaluate_niah(*engine, *session.tokenizer, batch, o.niah);
    result.correct += part.correct;
    result.total += part.total;
    for (const NiahCell& cell : part.cells) {
      auto it = std::find_if(result.cells.begin(), result.cells.end(), [&](const NiahCell& c) {
        return c.format == cell.format && c.context_tokens == cell.context_tokens &&
               c.depth == cell.depth;
      });
      if (it == result.cells.end()) {
        result.cells.push_back(cell);
      } else {
        it->correct += cell.correct;
        it->total += cell.total;
      }
    }
  }
  fmt::print("needle in a haystack, KV {}: {}/{} correct ({:.3f})\n", describe(session.kv),
             result.correct, result.total, result.accuracy());
  fmt::print("| format | context | depth | correct | total |\n|---|---|---|---|---|\n");
  nlohmann::json cells = nlohmann::json::array();
  for (const NiahCell& cell : result.cells) {
    fmt::print("| {} | {} | {:.2f} | {} | {} |\n", format_name(cell.format), cell.context_tokens,
               cell.depth, cell.correct, cell.total);
    cells.push_back({{"format", format_name(cell.format)},
                     {"context", cell.context_tokens},
                     {"depth", cell.depth},
                     {"correct", cell.correct},
                     {"total", cell.total}});
  }
  const nlohmann::json report =
      with_run_record({{"kv", describe(session.kv)},
                       {"accuracy", result.accuracy()},
                       {"correct", result.correct},
                       {"total", result.total},
                       {"prefill", o.quantized_prefill ? "decode rule" : "full precision"},
                       {"seed", o.niah.seed},
                       {"cells", cells}});
  write_report(o.json_path, report.dump(2) + "\n");
  write_report(o.figure_path, heat_map_svg(accuracy_map(
                                  result, o.niah, "NIAH accuracy, KV " + describe(session.kv))));
}

}  // namespace

void register_eval_niah(CLI::App& eval) {
  auto options = std::make_shared<EvalNiahOptions>();
  CLI::App* command = eval.add_subcommand("niah", "Needle-in-a-haystack retrieval accuracy");
  add_model_options(*command, options->model);
  add_step_token_options(*command, options->step_tokens);
  command->add_option("--text", options->text_path, "filler text (default: testbed valid.xz)");
  command->add_option("--contexts", options->niah.context_tokens, "context lengths (tokens)")
      ->capture_default_str();
  command->add_option("--depths", options->niah.depths, "needle depths in [0, 1]")
      ->capture_default_str();
  command
      ->add_option("--prompts-per-cell", options->niah.prompts_per_cell,
                   "prompts per format and cell")
      ->capture_default_str();
  command->add_option("--seed", options->niah.seed)->capture_default_str();
  command->add_option("--batch", options->batch, "prompts run together")->capture_default_str();
  command->add_flag("--quantized-prefill", options->quantized_prefill,
                    "the prompt follows the decode rule too (default: prefill in full precision)");
  command->add_option("--output", options->json_path, "write the JSON report here");
  command->add_option("--figure", options->figure_path, "write the accuracy heat map (SVG) here");
  command->callback([options] { run_eval_niah(*options); });
}

}  // namespace oscar::cli
