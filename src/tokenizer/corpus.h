#pragma once
// A text corpus as one token stream: documents tokenized and joined by a separator token (the
// end-of-text token the model was trained with between documents).
#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace oscar {

std::vector<int32_t> tokenize_documents(const Tokenizer& tokenizer,
                                        const std::vector<std::string>& documents,
                                        int32_t separator_token, int64_t max_tokens = -1);

}  // namespace oscar
