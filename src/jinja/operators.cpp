// Jinja's binary operators with Python's semantics: and/or return an operand, == compares
// deeply, `in` tests membership, + joins strings and lists, // and % floor towards -inf, and
// integer arithmetic that overflows fails rather than wraps.
#include <cmath>

#include "jinja/interpreter.h"

namespace oscar::jinja {
namespace {

int64_t python_modulo(int64_t a, int64_t b) {
  const int64_t r = a % b;
  return r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
}

int64_t python_floor_division(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

}  // namespace

Value Interpreter::evaluate_binary(const Expression& e) {
  const std::string& op = e.name;
  const Value left = evaluate(*e.items[0]);
  if (op == "and") return truthy(left) ? evaluate(*e.items[1]) : left;
  if (op == "or") return truthy(left) ? left : evaluate(*e.items[1]);
  const Value right = evaluate(*e.items[1]);
  if (op == "==") return equal(left, right);
  if (op == "!=") return !equal(left, right);
  if (op == "<") return compare(left, right) < 0;
  if (op == ">") return compare(left, right) > 0;
  if (op == "<=") return compare(left, right) <= 0;
  if (op == ">=") return compare(left, right) >= 0;
  if (op == "in") return contains(right, left);
  if (op == "not in") return !contains(right, left);
  if (op == "~") {
    std::string text = to_string(left) + to_string(right);
    check_size(text.size());
    return text;
  }
  if (op == "+" && left.is_string() && right.is_string()) {
    check_size(left.as_string().size() + right.as_string().size());
    return left.as_string() + right.as_string();
  }
  if (op == "+" && left.is_array() && right.is_array()) {
    Array items = left.as_array();
    items.insert(items.end(), right.as_array().begin(), right.as_array().end());
    count_steps(int64_t(items.size()));
    return items;
  }
  if (op == "*" && (left.is_string() || left.is_array()) && right.is_int()) {
    const int64_t times = std::max<int64_t>(right.as_int(), 0);
    if (left.is_string()) {
      check_size(left.as_string().size() *
                 size_t(std::min<int64_t>(times, int64_t(limits_.max_output_bytes) + 1)));
      std::string out;
      for (int64_t i = 0; i < times; ++i) out += left.as_string();
      return out;
    }
    count_steps(times * int64_t(left.as_array().size()));
    Array out;
    for (int64_t i = 0; i < times; ++i)
      out.insert(out.end(), left.as_array().begin(), left.as_array().end());
    return out;
  }
  if (!left.is_number() || !right.is_number() || left.is_bool() || right.is_bool()) {
    fail("unsupported operand types for {}: '{}' and '{}'", op, left.type_name(),
         right.type_name());
  }
  if (left.is_int() && right.is_int() && op != "/") {
    const int64_t a = left.as_int(), b = right.as_int();
    int64_t result = 0;
    if (op == "+" && !__builtin_add_overflow(a, b, &result)) return result;
    if (op == "-" && !__builtin_sub_overflow(a, b, &result)) return result;
    if (op == "*" && !__builtin_mul_overflow(a, b, &result)) return result;
    if (op == "//" || op == "%") {
      require(b != 0, "integer division or modulo by zero");
      if (a == INT64_MIN && b == -1) fail("integer overflow in {}", op);
      return op == "//" ? python_floor_division(a, b) : python_modulo(a, b);
    }
    if (op == "**" && b >= 0) {
      int64_t power = 1;
      bool overflow = false;
      for (int64_t i = 0; i < b && !overflow; ++i)
        overflow = __builtin_mul_overflow(power, a, &power);
      if (!overflow) return power;
    }
    if (op != "**") fail("integer overflow in {}", op);
  }
  const double a = left.as_number(), b = right.as_number();
  if (op == "+") return a + b;
  if (op == "-") return a - b;
  if (op == "*") return a * b;
  if (op == "**") return std::pow(a, b);
  require(b != 0.0, "float division by zero");
  if (op == "/") return a / b;
  if (op == "//") return std::floor(a / b);
  if (op == "%") return a - b * std::floor(a / b);
  fail("unknown operator {}", op);
}

}  // namespace oscar::jinja
