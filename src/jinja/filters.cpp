// Jinja's filters (`x | tojson`) and tests (`x is string`) that chat templates use.
#include <algorithm>
#include <cmath>

#include "jinja/interpreter.h"

namespace oscar::jinja {
namespace {

Array as_items(const Value& input, const char* filter) {
  if (input.is_array()) return input.as_array();
  if (input.is_undefined() || input.is_none()) return {};
  if (input.is_object()) {
    Array keys;
    for (const auto& entry : input.as_object().entries) keys.emplace_back(entry.first);
    return keys;
  }
  if (input.is_string()) {
    Array characters;
    for (const std::string_view c : code_points(input.as_string()))
      characters.emplace_back(std::string(c));
    return characters;
  }
  fail("filter '{}' needs a sequence, not {}", filter, input.type_name());
}

// `attribute` may be dotted ("function.name"), as Jinja's attribute getters are.
Value attribute_of(const Value& item, const std::string& path) {
  Value current = item;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t dot = std::min(path.find('.', start), path.size());
    const std::string key = path.substr(start, dot - start);
    const Value* found = current.is_object() ? current.as_object().find(key) : nullptr;
    if (found == nullptr) return Value::undefined(key);
    current = *found;
    start = dot + 1;
  }
  return current;
}

std::string indent_text(const std::string& text, const Value& width, bool first, bool blank) {
  const std::string padding =
      width.is_string()
          ? width.as_string()
          : std::string(size_t(width.is_int() ? std::clamp<int64_t>(width.as_int(), 0, 256) : 4),
                        ' ');
  std::string out;
  size_t start = 0;
  bool first_line = true;
  while (start <= text.size()) {
    const size_t end = std::min(text.find('\n', start), text.size());
    const std::string line = text.substr(start, end - start);
    if ((first_line ? first : true) && (blank || !line.empty())) out += padding;
    out += line;
    if (end < text.size()) out += '\n';
    first_line = false;
    start = end + 1;
  }
  return out;
}

// select/reject/selectattr/rejectattr: the items passing (or failing) a test.
Value filter_items(Interpreter& run, const Value& input, const Arguments& a, bool by_attribute,
                   bool keep) {
  Array out;
  const size_t test_at = by_attribute ? 1 : 0;
  const Value attribute = by_attribute ? a.get(0, "attribute") : Value();
  const Value test = a.get(test_at, "test");
  Arguments test_arguments;
  for (size_t i = test_at + 1; i < a.positional.size(); ++i)
    test_arguments.positional.push_back(a.positional[i]);
  for (const Value& item : as_items(input, "select")) {
    run.count_steps();
    const Value subject = by_attribute ? attribute_of(item, to_string(attribute)) : item;
    const bool passes = test.is_string()
                            ? apply_test(run, test.as_string(), subject, test_arguments)
                            : truthy(subject);
    if (passes == keep) out.push_back(item);
  }
  return out;
}

Value sorted(Interpreter& run, const Value& input, const Arguments& a) {
  Array items = as_items(input, "sort");
  run.count_steps(int64_t(items.size()));
  const Value attribute = a.get(2, "attribute");
  const bool reverse = truthy(a.get(0, "reverse"));
  auto key = [&](const Value& v) {
    return attribute.is_string() ? attribute_of(v, attribute.as_string()) : v;
  };
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    return reverse ? compare(key(x), key(y)) > 0 : compare(key(x), key(y)) < 0;
  });
  return items;
}

}  // namespace

Value apply_filter(Interpreter& run, const std::string& name, const Value& input,
                   const Arguments& a) {
  if (name == "tojson") {
    JsonStyle style;
    const Value indent = a.get(0, "indent");
    if (indent.is_int()) style.indent = int(std::clamp<int64_t>(indent.as_int(), 0, 64));
    const Value separators = a.get(99, "separators");
    if (separators.is_array() && separators.as_array().size() == 2) {
      style.item_separator = to_string(separators.as_array()[0]);
      style.key_separator = to_string(separators.as_array()[1]);
    }
    style.sort_keys = truthy(a.get(99, "sort_keys"));
    std::string out = to_json(input, style);
    run.check_size(out.size());
    return out;
  }
  if (name == "trim")
    return member_function(run, Value(to_string(input)), "strip")
        .as_function()
        .call(Arguments{{a.get(0, "chars")}, {}});
  if (name == "string") return to_string(input);
  if (name == "length" || name == "count") {
    if (input.is_string()) return int64_t(code_points(input.as_string()).size());
    if (input.is_array()) return int64_t(input.as_array().size());
    if (input.is_object()) return int64_t(input.as_object().entries.size());
    fail("object of type '{}' has no length", input.type_name());
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    return member_function(run, Value(to_string(input)), name).as_function().call({});
  }
  if (name == "replace")
    return member_function(run, Value(to_string(input)), "replace").as_function().call(a);
  if (name == "int") {
    if (input.is_int()) return input;
    if (input.is_float()) return int64_t(input.as_number());
    if (input.is_bool()) return int64_t(input.as_bool());
    try {
      return int64_t(std::stoll(input.is_string() ? input.as_string() : ""));
    } catch (const std::exception&) {
      return a.get(0, "default", Value(0));
    }
  }
  if (name == "float") {
    if (input.is_number()) return input.as_number();
    try {
      return std::stod(input.is_string() ? input.as_string() : "");
    } catch (const std::exception&) {
      return a.get(0, "default", Value(0.0));
    }
  }
  if (name == "abs") {
    require(input.is_number(), "bad operand type for abs(): '{}'", input.type_name());
    return input.is_int() ? Value(input.as_int() < 0 ? -input.as_int() : input.as_int())
                          : Value(std::fabs(input.as_number()));
  }
  if (name == "round") {
    const Value digits = a.get(0, "precision", Value(0));
    const double scale =
        std::pow(10.0, double(digits.is_int() ? std::clamp<int64_t>(digits.as_int(), 0, 15) : 0));
    return std::nearbyint(input.as_number() * scale) / scale;
  }
  if (name == "default" || name == "d") {
    const bool boolean = truthy(a.get(1, "boolean"));
    return (input.is_undefined() || (boolean && !truthy(input)))
               ? a.get(0, "default_value", Value(""))
               : input;
  }
  if (name == "first" || name == "last") {
    const Array items = as_items(input, name.c_str());
    if (items.empty()) return Value::undefined(name);
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") return as_items(input, "list");
  if (name == "reverse") {
    if (input.is_string()) {
      auto characters = code_points(input.as_string());
      std::string out;
      for (auto c = characters.rbegin(); c != characters.rend(); ++c) out += *c;
      return out;
    }
    Array items = as_items(input, "reverse");
    std::reverse(items.begin(), items.end());
    return items;
  }
  if (name == "join") {
    const Value attribute = a.get(1, "attribute");
    Array items = as_items(input, "join");
    if (attribute.is_string()) {
      for (Value& item : items) item = attribute_of(item, attribute.as_string());
    }
    const Value separator = a.get(0, "d", Value(""));
    return member_function(run, Value(to_string(separator)), "join")
        .as_function()
        .call(Arguments{{Value(items)}, {}});
  }
  if (name == "items") {
    if (input.is_undefined() || input.is_none()) return Array{};
    require(input.is_object(), "filter 'items' needs a dict, not {}", input.type_name());
    return member_function(run, input, "items").as_function().call({});
  }
  if (name == "dictsort") {
    require(input.is_object(), "filter 'dictsort' needs a dict, not {}", input.type_name());
    Array pairs = member_function(run, input, "items").as_function().call({}).as_array();
    std::stable_sort(pairs.begin(), pairs.end(), [](const Value& x, const Value& y) {
      return compare(x.as_array()[0], y.as_array()[0]) < 0;
    });
    return pairs;
  }
  if (name == "sort") return sorted(run, input, a);
  if (name == "unique") {
    Array out;
    for (const Value& item : as_items(input, "unique")) {
      run.count_steps(int64_t(out.size()) + 1);
      if (!contains(Value(out), item)) out.push_back(item);
    }
    return out;
  }
  if (name == "map") {
    Array out;
    const Value attribute = a.get(99, "attribute");
    for (const Value& item : as_items(input, "map")) {
      run.count_steps();
      if (attribute.is_string()) {
        Value found = attribute_of(item, attribute.as_string());
        out.push_back(found.is_undefined() ? a.get(99, "default") : found);
      } else {
        const Value filter = a.get(0, "filter");
        require(filter.is_string(), "map needs a filter name or attribute=");
        Arguments rest;
        rest.positional.assign(a.positional.begin() + 1, a.positional.end());
        out.push_back(apply_filter(run, filter.as_string(), item, rest));
      }
    }
    return out;
  }
  if (name == "select" || name == "reject")
    return filter_items(run, input, a, false, name == "select");
  if (name == "selectattr" || name == "rejectattr")
    return filter_items(run, input, a, true, name == "selectattr");
  if (name == "sum" || name == "min" || name == "max") {
    const Array items = as_items(input, name.c_str());
    if (name == "sum") {
      Value total = a.get(1, "start", Value(0));
      for (const Value& item : items) {
        require(item.is_number() && total.is_number(), "sum() needs numbers");
        total = total.is_int() && item.is_int() ? Value(total.as_int() + item.as_int())
                                                : Value(total.as_number() + item.as_number());
      }
      return total;
    }
    if (items.empty()) return Value::undefined(name);
    return *std::min_element(items.begin(), items.end(), [&](const Value& x, const Value& y) {
      return name == "min" ? compare(x, y) < 0 : compare(x, y) > 0;
    });
  }
  if (name == "indent") {
    return indent_text(to_string(input), a.get(0, "width", Value(4)), truthy(a.get(1, "first")),
                       truthy(a.get(2, "blank")));
  }
  if (name == "safe" || name == "e" || name == "escape")
    return name == "safe" ? input : Value(to_string(input));
  if (name == "wordcount")
    return int64_t(member_function(run, Value(to_string(input)), "split")
                       .as_function()
                       .call({})
                       .as_array()
                       .size());
  fail("unknown filter '{}'", name);
}

bool apply_test(Interpreter& run, const std::string& name, const Value& input, const Arguments& a) {
  (void)run;
  const Value other = a.get(0, "value");
  if (name == "defined") return !input.is_undefined();
  if (name == "undefined") return input.is_undefined();
  if (name == "none") return input.is_none();
  if (name == "string") return input.is_string();
  if (name == "number") return input.is_number();
  if (name == "integer") return input.is_int();
  if (name == "float") return input.is_float();
  if (name == "boolean") return input.is_bool();
  if (name == "true") return input.is_bool() && input.as_bool();
  if (name == "false") return input.is_bool() && !input.as_bool();
  if (name == "mapping") return input.is_object();
  if (name == "iterable") return input.is_array() || input.is_object() || input.is_string();
  if (name == "sequence") return input.is_array() || input.is_object() || input.is_string();
  if (name == "callable") return input.is_function();
  if (name == "equalto" || name == "eq" || name == "==" || name == "sameas")
    return equal(input, other);
  if (name == "ne" || name == "!=") return !equal(input, other);
  if (name == "gt" || name == "greaterthan") return compare(input, other) > 0;
  if (name == "ge") return compare(input, other) >= 0;
  if (name == "lt" || name == "lessthan") return compare(input, other) < 0;
  if (name == "le") return compare(input, other) <= 0;
  if (name == "in") return contains(other, input);
  if (name == "odd" || name == "even") {
    require(input.is_int(), "test '{}' needs an integer", name);
    return (input.as_int() % 2 != 0) == (name == "odd");
  }
  if (name == "divisibleby") {
    require(input.is_int() && other.is_int() && other.as_int() != 0,
            "test 'divisibleby' needs non-zero integers");
    return input.as_int() % other.as_int() == 0;
  }
  if (name == "lower" || name == "upper") {
    if (!input.is_string()) return false;
    const std::string& text = input.as_string();
    return std::none_of(text.begin(), text.end(), [&](char c) {
      return name == "lower" ? std::isupper(static_cast<unsigned char>(c))
                             : std::islower(static_cast<unsigned char>(c));
    });
  }
  fail("unknown test '{}'", name);
}

}  // namespace oscar::jinja
