#include "tokenizer/corpus.h"

namespace oscar {

std::vector<int32_t> tokenize_documents(const Tokenizer& tokenizer,
                                        const std::vector<std::string>& documents,
                                        int32_t separator_token, int64_t max_tokens) {
  std::vector<int32_t> tokens;
  for (const std::string& document : documents) {
    if (!tokens.empty()) tokens.push_back(separator_token);
    const std::vector<int32_t> ids = tokenizer.encode(document, /*add_special_tokens=*/false);
    tokens.insert(tokens.end(), ids.begin(), ids.end());
    if (max_tokens >= 0 && int64_t(tokens.size()) >= max_tokens) {
      tokens.resize(size_t(max_tokens));
      break;
    }
  }
  return tokens;
}

}  // namespace oscar
