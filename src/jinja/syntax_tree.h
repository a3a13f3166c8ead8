#pragma once
// The parsed form of a template: expressions and statements, each with the line it came from so
// that an error can name it.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/value.h"

namespace oscar::jinja {

struct Expression;
struct Statement;
using ExpressionPtr = std::unique_ptr<Expression>;
using StatementList = std::vector<std::unique_ptr<Statement>>;

enum class ExpressionKind {
  literal,      // value
  name,         // name
  list,         // items
  tuple,        // items (a tuple evaluates to a list)
  dict,         // items: key, value, key, value, ...
  attribute,    // items[0].name
  subscript,    // items[0][items[1]]
  slice,        // items[0][items[1]:items[2]:items[3]] (null entries are omitted bounds)
  call,         // items[0](items[1..], keywords)
  filter,       // items[0] | name(items[1..], keywords)
  test,         // items[0] is [not] name(items[1..])
  unary,        // name ("not", "-", "+") items[0]
  binary,       // items[0] name items[1]
  conditional,  // items[0] if items[1] else items[2] (items[2] may be null)
};

struct Expression {
  ExpressionKind kind = ExpressionKind::literal;
  int line = 1;
  Value value;
  std::string name;
  std::vector<ExpressionPtr> items;
  std::vector<std::pair<std::string, ExpressionPtr>> keywords;
  bool negated = false;  // `is not`
};

enum class StatementKind {
  text,       // text
  output,     // {{ expression }}
  set,        // {% set targets = expression %} or {% set target.attribute = expression %}
  set_block,  // {% set targets[0] %}body{% endset %}
  if_chain,   // conditions[i] -> branches[i]; a trailing branch without condition is the else
  for_loop,   // {% for targets in expression [if condition] %}body{% else %}else_body{% endfor %}
  macro,      // {% macro name(parameters) %}body{% endmacro %}
  loop_break,
  loop_continue,
};

struct Statement {
  StatementKind kind = StatementKind::text;
  int line = 1;
  std::string text;
  std::vector<std::string> targets;
  std::string attribute;  // set: target.attribute
  ExpressionPtr expression, condition;
  std::vector<ExpressionPtr> conditions;
  std::vector<StatementList> branches;
  StatementList body, else_body;
  std::vector<std::pair<std::string, ExpressionPtr>> parameters;  // macro: name, default (or null)
};

}  // namespace oscar::jinja
