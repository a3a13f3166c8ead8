#pragma once
// Runs parsed statements: scopes, control flow and expressions. Filters, tests, methods and
// global functions live in builtins.cpp; they reach back here to call values and count steps.
#include <memory>
#include <string>
#include <vector>

#include "jinja/syntax_tree.h"
#include "jinja/template.h"
#include "util/error.h"

namespace oscar::jinja {

// An error that already names the template line at fault.
class TemplateError : public Error {
 public:
  using Error::Error;
};

class Interpreter {
 public:
  explicit Interpreter(const RenderLimits& limits);

  std::string run(const StatementList& statements, std::shared_ptr<Object> globals);

  // Counts work towards RenderLimits::max_steps; throws Error past it.
  void count_steps(int64_t steps = 1);
  // Throws Error when a string of `bytes` would pass RenderLimits::max_output_bytes.
  void check_size(size_t bytes) const;
  Value call(const Value& callee, const Arguments& arguments);
  // Throws Error where `item`, put inside a new list or dict, would nest deeper than
  // kMaxValueDepth (deep values would exhaust the stack where they are walked or freed). Each
  // item visited counts as a step.
  void check_nesting(const Value& item, int depth = 1);

 private:
  enum class Flow { normal, break_loop, continue_loop };

  Flow execute(const StatementList& statements, std::string& out);
  Flow execute(const Statement& statement, std::string& out);
  Flow execute_for(const Statement& statement, std::string& out);
  void execute_set(const Statement& statement, Value value);
  Value define_macro(const Statement& statement);
  Value evaluate(const Expression& expression);
  Value evaluate_inner(const Expression& expression);
  Value evaluate_binary(const Expression& expression);
  Arguments evaluate_arguments(const Expression& expression, size_t first);

  Value lookup(const std::string& name) const;
  void assign(const std::string& name, Value value);

  RenderLimits limits_;
  int64_t steps_ = 0;
  int call_depth_ = 0;
  std::vector<std::shared_ptr<Object>> scopes_;  // [0] holds the globals and the context
};

// builtins.cpp
Value apply_filter(Interpreter& interpreter, const std::string& name, const Value& input,
                   const Arguments& arguments);
bool apply_test(Interpreter& interpreter, const std::string& name, const Value& input,
                const Arguments& arguments);
// A method of a str, list or dict bound to `self` (`text.startswith`), or undefined.
Value member_function(Interpreter& interpreter, const Value& self, const std::string& name);
void add_globals(Interpreter& interpreter, Object& globals);
bool contains(const Value& container, const Value& item);
// -1, 0, 1 as Python's < orders two numbers or two strings; Error for other pairs.
int compare(const Value& a, const Value& b);

}  // namespace oscar::jinja
