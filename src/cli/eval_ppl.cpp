// oscar eval ppl: perplexity over windows of a text, with the KV format under test.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/eval_common.h"
#include "cli/run_record.h"
#include "eval/perplexity.h"
#include "kvcache/page_layout.h"
#include "tokenizer/corpus.h"

namespace oscar::cli {
namespace {

struct EvalPplOptions {
  ModelOptions model;
  StepTokenOptions step_tokens;
  std::string text_path;
  PerplexityOptions ppl;
  bool json = false;
  std::string json_path;
};

void run_eval_ppl(const EvalPplOptions& o) {
  const ModelSession session = open_model(o.model);
  const ModelConfig& model = session.weights.config;
  const int32_t separator = session.eos_token_ids.empty() ? 0 : session.eos_token_ids.front();
  const auto tokens = tokenize_documents(*session.tokenizer, evaluation_documents(o.text_path),
                                         separator, o.ppl.context_tokens * o.ppl.windows);
  auto engine = make_eval_engine(session, o.step_tokens, o.ppl.windows, o.ppl.context_tokens);
  const PerplexityResult r = evaluate_perplexity(*engine, tokens, o.ppl);
  const PageLayout layout = make_page_layout(session.kv, model.num_kv_heads, model.head_dim);
  const int64_t context_128k = 128 * 1024;
  const double bpe = bits_per_element(
      layout, footprint_for_tokens(session.kv, o.ppl.context_tokens), o.ppl.context_tokens);
  const double bpe_128k =
      bits_per_element(layout, footprint_for_tokens(session.kv, context_128k), context_128k);
  const nlohmann::json report =
      with_run_record({{"ppl", r.perplexity},
                       {"tokens", r.scored_tokens},
                       {"windows", o.ppl.windows},
                       {"context", o.ppl.context_tokens},
                       {"window_ppl", r.window_perplexity},
                       {"window_ppl_std", r.window_std},
                       {"bpe", bpe},
                       {"bpe_128k", bpe_128k},
                       {"kv", describe(session.kv)},
                       {"text", o.text_path.empty() ? "models/testbed/valid.xz" : o.text_path}});
  write_report(o.json_path, report.dump(2) + "\n");
  if (o.json) {
    fmt::print("{}\n", report.dump());
    return;
  }
  fmt::print("| kv | ppl | window std | tokens | BPE | BPE at 128K |\n|---|---|---|---|---|---|\n");
  fmt::print("| {} | {:.4f} | {:.3f} | {} | {:.3f} | {:.3f} |\n", describe(session.kv),
             r.perplexity, r.window_std, r.scored_tokens, bpe, bpe_128k);
}

}  // namespace

void register_eval_ppl(CLI::App& eval) {
  auto options = std::make_shared<EvalPplOptions>();
  CLI::App* command = eval.add_subcommand("ppl", "Perplexity over fixed windows of a text");
  add_model_options(*command, options->model);
  add_step_token_options(*command, options->step_tokens);
  command->add_option("--text", options->text_path,
                      "text file (.xz, .jsonl or plain; default: testbed valid.xz)");
  command->add_option("--windows", options->ppl.windows, "windows to score")->capture_default_str();
  command->add_option("--context", options->ppl.context_tokens, "tokens per window")
      ->capture_default_str();
  command->add_flag("--json", options->json, "print one JSON object instead of a table");
  command->add_option("--output", options->json_path, "also write the JSON report to this file");
  command->callback([options] { run_eval_ppl(*options); });
}

}  // namespace oscar::cli
