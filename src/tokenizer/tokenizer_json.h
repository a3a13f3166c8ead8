#pragma once
// Reading and validating tokenizer.json: every field the tokenizer relies on is checked, and
// anything it cannot honour (another model type, byte fallback, an unknown normaliser or
// pre-tokenizer pattern) is an Error naming the file and the field.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/pretokenizer.h"

namespace oscar {

struct TokenizerDefinition {
  struct AddedToken {
    std::string content;
    int32_t id = 0;
    bool special = false;
    bool lstrip = false;
    bool rstrip = false;
  };
  SplitPattern pattern = SplitPattern::qwen2;
  bool normalize_nfc = false;
  bool ignore_merges = false;
  std::vector<std::pair<std::string, int32_t>> vocabulary;  // raw bytes -> id
  std::vector<std::pair<std::string, std::string>> merges;  // raw bytes, by rank
  std::vector<AddedToken> added_tokens;
  std::vector<int32_t> prefix_ids, suffix_ids;  // post-processor template of a single text
};

TokenizerDefinition parse_tokenizer_json(std::string_view json_text, const std::string& source);

}  // namespace oscar
