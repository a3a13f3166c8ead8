#pragma once
// Parses the tokens of a template into statements (recursive descent, Jinja's precedence).
#include <vector>

#include "jinja/lexer.h"
#include "jinja/syntax_tree.h"

namespace oscar::jinja {

// Throws Error naming the line at fault. Nesting deeper than kMaxNestingDepth is refused, so a
// hostile template cannot exhaust the stack.
inline constexpr int kMaxNestingDepth = 128;
StatementList parse(const std::vector<Token>& tokens);

}  // namespace oscar::jinja
