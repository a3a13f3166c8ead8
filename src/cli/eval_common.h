#pragma once
// Shared by the `oscar eval` subcommands: the text to evaluate on, engine sizing, and report files.
#include <string>
#include <vector>

#include "cli/model_session.h"
#include "cli/step_token_options.h"

namespace oscar::cli {

// Documents of --text (default: the testbed's held-out valid.xz).
std::vector<std::string> evaluation_documents(const std::string& path);

// An engine for `sequences` concurrent sequences of up to `tokens` tokens each.
std::unique_ptr<Engine> make_eval_engine(const ModelSession& session,
                                         const StepTokenOptions& step_tokens, int64_t sequences,
                                         int64_t tokens);

// Writes `text` to `path` when a path is given (atomically), creating nothing otherwise.
void write_report(const std::string& path, const std::string& text);

}  // namespace oscar::cli
