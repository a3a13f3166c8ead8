#pragma once
// The regex split of byte-level BPE tokenizers, hand-written (the build machines have no regex
// library with Unicode properties). Each pattern is matched with the leftmost-first, greedy,
// backtracking semantics of the Oniguruma engine that Hugging Face tokenizers uses:
//   gpt2:  's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   qwen2: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|
//          \s*[\r\n]+|\s+(?!\S)|\s+
//   llama3: as qwen2 with \p{N}{1,3}
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace oscar {

enum class SplitPattern { gpt2, qwen2, llama3 };

// Recognises a tokenizer.json Split regex; nullopt when it is none of the three.
std::optional<SplitPattern> recognise_split_pattern(std::string_view regex);

// Splits text (code points) into pre-tokens, returned as [begin, end) index pairs.
std::vector<std::pair<size_t, size_t>> split_pretokens(std::u32string_view text,
                                                       SplitPattern pattern);

}  // namespace oscar
