#include "tokenizer/pretokenizer.h"

#include "tokenizer/unicode_data.h"

namespace oscar {
namespace {

constexpr std::string_view kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

bool is_newline(char32_t c) {
  return c == '\r' || c == '\n';
}
bool is_symbol(char32_t c) {
  return !is_whitespace(c) && !is_letter(c) && !is_number(c);
}

char32_t lower_ascii(char32_t c) {
  return (c >= 'A' && c <= 'Z') ? c + 32 : c;
}

class Matcher {
 public:
  Matcher(std::u32string_view text, SplitPattern pattern) : text_(text), pattern_(pattern) {}

  // Length of the match at position i (at least 1: the final \s+ or a symbol run always matches
  // a character the earlier alternatives did not).
  size_t match(size_t i) const {
    if (size_t n = contraction(i)) return n;
    if (size_t n = letters(i)) return n;
    if (size_t n = numbers(i)) return n;
    if (size_t n = symbols(i)) return n;
    if (pattern_ != SplitPattern::gpt2) {
      if (size_t n = whitespace_then_newlines(i)) return n;
    }
    if (size_t n = whitespace_not_before_text(i)) return n;
    if (size_t n = whitespace(i)) return n;
    return 1;  // unreachable for valid input; keeps the splitter total
  }

 private:
  char32_t at(size_t i) const { return i < text_.size() ? text_[i] : 0; }
  bool has(size_t i) const { return i < text_.size(); }

  size_t run(size_t i, bool (*predicate)(char32_t)) const {
    size_t j = i;
    while (has(j) && predicate(text_[j])) ++j;
    return j - i;
  }

  // 's|'t|'re|'ve|'m|'ll|'d (case-insensitive except for gpt2)
  size_t contraction(size_t i) const {
    if (at(i) != '\'') return 0;
    const bool fold = pattern_ != SplitPattern::gpt2;
    auto is = [&](size_t k, char expected) {
      return has(k) && (fold ? lower_ascii(text_[k]) : text_[k]) == char32_t(expected);
    };
    for (const char* suffix : {"s", "t", "re", "ve", "m", "ll", "d"}) {
      size_t k = 0;
      while (suffix[k] != 0 && is(i + 1 + k, suffix[k])) ++k;
      if (suffix[k] == 0) return 1 + k;
    }
    return 0;
  }

  size_t letters(size_t i) const {
    if (pattern_ == SplitPattern::gpt2) {
      const size_t lead = at(i) == ' ' ? 1 : 0;
      const size_t n = run(i + lead, is_letter);
      return n > 0 ? lead + n : 0;
    }
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (!has(i)) return 0;
    if (is_letter(text_[i])) return run(i, is_letter);
    const char32_t c = text_[i];
    if (!is_newline(c) && !is_number(c) && is_letter(at(i + 1))) return 1 + run(i + 1, is_letter);
    return 0;
  }

  size_t numbers(size_t i) const {
    switch (pattern_) {
      case SplitPattern::gpt2: {
        const size_t lead = at(i) == ' ' ? 1 : 0;
        const size_t n = run(i + lead, is_number);
        return n > 0 ? lead + n : 0;
      }
      case SplitPattern::qwen2:
        return has(i) && is_number(text_[i]) ? 1 : 0;
      case SplitPattern::llama3:
        return std::min<size_t>(3, run(i, is_number));
    }
    return 0;
  }

  //  ?[^\s\p{L}\p{N}]+ , then [\r\n]* for qwen2 / llama3
  size_t symbols(size_t i) const {
    const size_t lead = (at(i) == ' ' && has(i + 1) && is_symbol(text_[i + 1])) ? 1 : 0;
    const size_t n = run(i + lead, is_symbol);
    if (n == 0) return 0;
    const size_t newlines = pattern_ == SplitPattern::gpt2 ? 0 : run(i + lead + n, is_newline);
    return lead + n + newlines;
  }

  // \s*[\r\n]+ : up to and including the last newline of the whitespace run.
  size_t whitespace_then_newlines(size_t i) const {
    const size_t n = run(i, is_whitespace);
    for (size_t k = n; k > 0; --k) {
      if (is_newline(text_[i + k - 1])) return k;
    }
    return 0;
  }

  // \s+(?!\S) : the whitespace run, less its last character when text follows it.
  size_t whitespace_not_before_text(size_t i) const {
    const size_t n = run(i, is_whitespace);
    if (n == 0) return 0;
    if (!has(i + n)) return n;
    return n >= 2 ? n - 1 : 0;
  }

  size_t whitespace(size_t i) const { return run(i, is_whitespace); }

  std::u32string_view text_;
  SplitPattern pattern_;
};

}  // namespace

std::optional<SplitPattern> recognise_split_pattern(std::string_view regex) {
  if (regex == kGpt2) return SplitPattern::gpt2;
  if (regex == kQwen2) return SplitPattern::qwen2;
  if (regex == kLlama3) return SplitPattern::llama3;
  return std::nullopt;
}

std::vector<std::pair<size_t, size_t>> split_pretokens(std::u32string_view text,
                                                       SplitPattern pattern) {
  const Matcher matcher(text, pattern);
  std::vector<std::pair<size_t, size_t>> pieces;
  for (size_t i = 0; i < text.size();) {
    const size_t length = matcher.match(i);
    pieces.emplace_back(i, i + length);
    i += length;
  }
  return pieces;
}

}  // namespace oscar
