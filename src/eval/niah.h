#pragma once
// Needle-in-a-haystack retrieval in the two formats the testbed model was trained on
// (models/testbed/README.md): a pass key, or several secret numbers keyed by words, hidden at a
// depth inside filler text; the prompt ends right after "is " and the greedy continuation's
// digits are compared with the answer.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "tokenizer/tokenizer.h"

namespace oscar {

enum class NeedleFormat { pass_key, secret_numbers };

struct NeedlePrompt {
  NeedleFormat format = NeedleFormat::pass_key;
  int64_t target_tokens = 0;  // the context length cell
  double depth = 0;           // where the (asked-for) needle sits, 0 = start, 1 = end of filler
  std::string text;
  std::string answer;  // digits
};

struct NiahOptions {
  std::vector<int64_t> context_tokens = {1024, 2048, 3072, 4000};
  std::vector<double> depths = {0.0, 0.25, 0.5, 0.75, 1.0};
  int64_t prompts_per_cell = 5;  // per format
  uint64_t seed = 1;
  int64_t answer_tokens = 8;
  bool full_precision_prefill =
      true;  // "bf16 prefill, then greedy decode against the quantized cache"
};

// Deterministic in options.seed; `filler_documents` supply the haystack and the key words.
std::vector<NeedlePrompt> build_needle_prompts(const Tokenizer& tokenizer,
                                               const std::vector<std::string>& filler_documents,
                                               const NiahOptions& options);

struct NiahCell {
  NeedleFormat format = NeedleFormat::pass_key;
  int64_t context_tokens = 0;
  double depth = 0;
  int64_t correct = 0;
  int64_t total = 0;
};

struct NiahResult {
  std::vector<NiahCell> cells;
  int64_t correct = 0;
  int64_t total = 0;
  double accuracy() const { return total > 0 ? double(correct) / double(total) : 0.0; }
};

NiahResult evaluate_niah(Engine& engine, const Tokenizer& tokenizer,
                         const std::vector<NeedlePrompt>& prompts, const NiahOptions& options);

// Whether a continuation starts with the answer's digits (leading spaces ignored).
bool continuation_matches(const std::string& continuation, const std::string& answer);

}  // namespace oscar
