#pragma once
// Splits a Jinja template into text and the tokens of its {{ }} and {% %} tags, applying the
// whitespace rules Hugging Face renders chat templates with: trim_blocks and lstrip_blocks on,
// `-` inside a delimiter strips the whitespace beside it, and one trailing newline is dropped.
#include <string>
#include <string_view>
#include <vector>

namespace oscar::jinja {

enum class TokenKind {
  text,            // literal template text
  variable_begin,  // {{
  variable_end,    // }}
  block_begin,     // {%
  block_end,       // %}
  name,
  string,  // value holds the unescaped string
  integer,
  floating,
  symbol,  // operators and punctuation: ( ) [ ] { } . , : | + - * / // % ** ~ = == != < > <= >=
  end,
};

struct Token {
  TokenKind kind = TokenKind::end;
  std::string value;
  int line = 1;
};

// Throws Error naming the line of an unterminated tag, string or an unexpected character.
std::vector<Token> tokenize(std::string_view source);

}  // namespace oscar::jinja
