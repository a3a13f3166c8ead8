#pragma once
// The values a Jinja template computes with, as Hugging Face chat templates see them: Python's
// None, bool, int, float, str, list and dict (insertion-ordered), plus Jinja's undefined and
// callables (macros, globals, bound methods). Lists and dicts are shared by reference, as in
// Python, so `list.append` and `set ns.key = ...` change the object every name refers to.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace oscar::jinja {

struct Value;
struct Object;
struct Function;
using Array = std::vector<Value>;

struct Undefined {
  std::string name;  // what was looked up, for the error when it is used
};

struct Value {
  std::variant<Undefined, std::nullptr_t, bool, int64_t, double, std::string,
               std::shared_ptr<Array>, std::shared_ptr<Object>, std::shared_ptr<Function>>
      data;

  Value() = default;
  Value(std::nullptr_t) : data(nullptr) {}
  Value(bool b) : data(b) {}
  Value(int i) : data(int64_t(i)) {}
  Value(int64_t i) : data(i) {}
  Value(double d) : data(d) {}
  Value(std::string s) : data(std::move(s)) {}
  Value(const char* s) : data(std::string(s)) {}
  Value(Array a) : data(std::make_shared<Array>(std::move(a))) {}
  Value(std::shared_ptr<Array> a) : data(std::move(a)) {}
  Value(std::shared_ptr<Object> o) : data(std::move(o)) {}
  Value(std::shared_ptr<Function> f) : data(std::move(f)) {}
  static Value undefined(std::string name = {}) {
    Value v;
    v.data = Undefined{std::move(name)};
    return v;
  }

  bool is_undefined() const { return std::holds_alternative<Undefined>(data); }
  bool is_none() const { return std::holds_alternative<std::nullptr_t>(data); }
  bool is_bool() const { return std::holds_alternative<bool>(data); }
  bool is_int() const { return std::holds_alternative<int64_t>(data); }
  bool is_float() const { return std::holds_alternative<double>(data); }
  bool is_number() const { return is_int() || is_float(); }
  bool is_string() const { return std::holds_alternative<std::string>(data); }
  bool is_array() const { return std::holds_alternative<std::shared_ptr<Array>>(data); }
  bool is_object() const { return std::holds_alternative<std::shared_ptr<Object>>(data); }
  bool is_function() const { return std::holds_alternative<std::shared_ptr<Function>>(data); }

  bool as_bool() const { return std::get<bool>(data); }
  int64_t as_int() const { return std::get<int64_t>(data); }
  double as_number() const { return is_int() ? double(as_int()) : std::get<double>(data); }
  const std::string& as_string() const { return std::get<std::string>(data); }
  Array& as_array() const { return *std::get<std::shared_ptr<Array>>(data); }
  Object& as_object() const { return *std::get<std::shared_ptr<Object>>(data); }
  Function& as_function() const { return *std::get<std::shared_ptr<Function>>(data); }

  const char* type_name() const;  // Python's name for the type, for errors
};

// A dict keeps its keys in insertion order (tojson writes them so); keys are strings, as in JSON.
struct Object {
  std::vector<std::pair<std::string, Value>> entries;
  bool is_namespace = false;  // `set ns.key = value` is allowed on namespace() objects only

  const Value* find(std::string_view key) const;
  void set(const std::string& key, Value value);
};

struct Arguments {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;

  // The argument at `index`, or the keyword `name`, or `fallback`.
  Value get(size_t index, std::string_view name, Value fallback = Value::undefined()) const;
};

struct Function {
  std::string name;
  std::function<Value(const Arguments&)> call;
};

Value make_object();
Value make_function(std::string name, std::function<Value(const Arguments&)> call);

bool truthy(const Value& value);
bool equal(const Value& a, const Value& b, int depth = 0);
// Python's str(): None, True, 1.5, ['a', 1], {'k': 'v'}; undefined is empty.
std::string to_string(const Value& value);
std::string python_repr(const Value& value, int depth = 0);

// Lists and dicts nest at most this deep (from JSON, and where tojson, repr and == walk them),
// so that no input can exhaust the stack.
inline constexpr int kMaxValueDepth = 256;

// JSON in and out. tojson writes as Python's json.dumps(ensure_ascii=False) does: ", " and ": "
// between items, or "," and ": " with an indent.
Value from_json(const nlohmann::ordered_json& json, int depth = 0);
struct JsonStyle {
  int indent = -1;  // -1: one line
  std::string item_separator, key_separator;
  bool sort_keys = false;
};
std::string to_json(const Value& value, const JsonStyle& style, int depth = 0);

// Strings are UTF-8; Python indexes them by code point.
std::vector<std::string_view> code_points(std::string_view text);

}  // namespace oscar::jinja
