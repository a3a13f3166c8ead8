// oscar eval: accuracy of a KV format, one subcommand per measure.
#include "cli/commands.h"

namespace oscar::cli {

void register_eval(CLI::App& app) {
  CLI::App* eval = app.add_subcommand("eval", "Measure what a KV cache format costs in accuracy");
  eval->require_subcommand(1);
  register_eval_ppl(*eval);
  register_eval_niah(*eval);
  register_eval_attention_error(*eval);
}

}  // namespace oscar::cli
