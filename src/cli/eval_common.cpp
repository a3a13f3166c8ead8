#include "cli/eval_common.h"

#include "format/documents.h"
#include "kvcache/page_layout.h"
#include "util/file_io.h"

namespace oscar::cli {

std::vector<std::string> evaluation_documents(const std::string& path) {
  return read_documents(path.empty() ? default_model_dir() + "/valid.xz" : path);
}

std::unique_ptr<Engine> make_eval_engine(const ModelSession& session,
                                         const StepTokenOptions& step_tokens, int64_t sequences,
                                         int64_t tokens) {
  EngineOptions options;
  options.scheduler = scheduler_options(step_tokens, session.device, sequences);
  options.max_model_len = std::max(tokens, session.weights.config.max_position_embeddings);
  return make_engine(session,
                     capacity_for_sequences(session.kv, tokens, sequences,
                                            max_new_tokens_per_step(options.scheduler)),
                     options);
}

void write_report(const std::string& path, const std::string& text) {
  if (!path.empty()) write_file_atomically(path, text);
}

}  // namespace oscar::cli
