#include "jinja/value.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "util/error.h"

namespace oscar::jinja {

const char* Value::type_name() const {
  static constexpr const char* names[] = {"undefined", "NoneType", "bool", "int",     "float",
                                          "str",       "list",     "dict", "function"};
  return names[data.index()];
}

const Value* Object::find(std::string_view key) const {
  for (const auto& [name, value] : entries) {
    if (name == key) return &value;
  }
  return nullptr;
}

void Object::set(const std::string& key, Value value) {
  for (auto& [name, old] : entries) {
    if (name == key) {
      old = std::move(value);
      return;
    }
  }
  entries.emplace_back(key, std::move(value));
}

Value Arguments::get(size_t index, std::string_view name, Value fallback) const {
  for (const auto& [key, value] : keyword) {
    if (key == name) return value;
  }
  return index < positional.size() ? positional[index] : fallback;
}

Value make_object() {
  return Value(std::make_shared<Object>());
}

Value make_function(std::string name, std::function<Value(const Arguments&)> call) {
  return Value(std::make_shared<Function>(Function{std::move(name), std::move(call)}));
}

bool truthy(const Value& value) {
  if (value.is_undefined() || value.is_none()) return false;
  if (value.is_bool()) return value.as_bool();
  if (value.is_int()) return value.as_int() != 0;
  if (value.is_float()) return value.as_number() != 0.0;
  if (value.is_string()) return !value.as_string().empty();
  if (value.is_array()) return !value.as_array().empty();
  if (value.is_object())
    return !value.as_object().entries.empty() || value.as_object().is_namespace;
  return true;
}

namespace {

void check_depth(int depth) {
  require(depth <= kMaxValueDepth, "lists and dicts nest deeper than {} levels", kMaxValueDepth);
}

}  // namespace

bool equal(const Value& a, const Value& b, int depth) {
  check_depth(depth);
  if (a.is_number() && b.is_number()) {
    if (a.is_int() && b.is_int()) return a.as_int() == b.as_int();
    return a.as_number() == b.as_number();
  }
  if (a.data.index() != b.data.index()) return false;
  if (a.is_undefined() || a.is_none()) return true;
  if (a.is_bool()) return a.as_bool() == b.as_bool();
  if (a.is_string()) return a.as_string() == b.as_string();
  if (a.is_array()) {
    const Array &x = a.as_array(), &y = b.as_array();
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i) {
      if (!equal(x[i], y[i], depth + 1)) return false;
    }
    return true;
  }
  if (a.is_object()) {
    const Object &x = a.as_object(), &y = b.as_object();
    if (x.entries.size() != y.entries.size()) return false;
    for (const auto& [key, value] : x.entries) {
      const Value* other = y.find(key);
      if (other == nullptr || !equal(value, *other, depth + 1)) return false;
    }
    return true;
  }
  return &a.as_function() == &b.as_function();
}

namespace {

// Python's repr of a float: the shortest text that reads back, always with a point or exponent.
std::string float_text(double number) {
  if (std::isnan(number)) return "nan";
  if (std::isinf(number)) return number > 0 ? "inf" : "-inf";
  std::string text = fmt::format("{}", number);
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

std::string quoted_repr(const std::string& text) {
  const char quote =
      text.find('\'') != std::string::npos && text.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, quote);
  for (const char c : text) {
    if (c == quote || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out += c;
    }
  }
  return out + quote;
}

}  // namespace

std::string python_repr(const Value& value, int depth) {
  check_depth(depth);
  if (value.is_string()) return quoted_repr(value.as_string());
  if (value.is_array()) {
    std::string out = "[";
    for (const Value& item : value.as_array())
      out += (out.size() > 1 ? ", " : "") + python_repr(item, depth + 1);
    return out + "]";
  }
  if (value.is_object()) {
    std::string out = "{";
    for (const auto& [key, item] : value.as_object().entries) {
      out += (out.size() > 1 ? ", " : "") + quoted_repr(key) + ": " + python_repr(item, depth + 1);
    }
    return out + "}";
  }
  return to_string(value);
}

std::string to_string(const Value& value) {
  if (value.is_undefined()) return {};
  if (value.is_none()) return "None";
  if (value.is_bool()) return value.as_bool() ? "True" : "False";
  if (value.is_int()) return std::to_string(value.as_int());
  if (value.is_float()) return float_text(value.as_number());
  if (value.is_string()) return value.as_string();
  if (value.is_function()) return "<function " + value.as_function().name + ">";
  return python_repr(value);
}

Value from_json(const nlohmann::ordered_json& json, int depth) {
  check_depth(depth);
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null:
      return nullptr;
    case nlohmann::ordered_json::value_t::boolean:
      return json.get<bool>();
    case nlohmann::ordered_json::value_t::number_integer:
      return json.get<int64_t>();
    case nlohmann::ordered_json::value_t::number_unsigned:
      return json.get<uint64_t>() > uint64_t(INT64_MAX) ? Value(json.get<double>())
                                                        : Value(json.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_float:
      return json.get<double>();
    case nlohmann::ordered_json::value_t::string:
      return json.get<std::string>();
    case nlohmann::ordered_json::value_t::array: {
      Array items;
      for (const auto& item : json) items.push_back(from_json(item, depth + 1));
      return items;
    }
    case nlohmann::ordered_json::value_t::object: {
      Value object = make_object();
      for (const auto& [key, item] : json.items())
        object.as_object().entries.emplace_back(key, from_json(item, depth + 1));
      return object;
    }
    default:
      fail("a JSON value of an unsupported type (binary) cannot enter a template");
  }
}

std::string to_json(const Value& value, const JsonStyle& style, int depth) {
  check_depth(depth);
  const bool indented = style.indent >= 0;
  const std::string item_separator = !style.item_separator.empty() ? style.item_separator
                                     : indented                    ? ","
                                                                   : ", ";
  const std::string key_separator = !style.key_separator.empty() ? style.key_separator : ": ";
  const std::string padding =
      indented ? "\n" + std::string(size_t(style.indent) * size_t(depth), ' ') : "";
  const std::string child_padding =
      indented ? padding + std::string(size_t(style.indent), ' ') : "";
  if (value.is_undefined() || value.is_none()) return "null";
  if (value.is_bool()) return value.as_bool() ? "true" : "false";
  if (value.is_int()) return std::to_string(value.as_int());
  if (value.is_float()) {
    const double number = value.as_number();
    return std::isfinite(number) ? float_text(number)
           : std::isnan(number)  ? "NaN"
           : number > 0          ? "Infinity"
                                 : "-Infinity";
  }
  if (value.is_string())
    return nlohmann::json(value.as_string())
        .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (value.is_array()) {
    const Array& items = value.as_array();
    if (items.empty()) return "[]";
    std::string out = "[";
    for (size_t i = 0; i < items.size(); ++i) {
      out += (i ? item_separator : "") + child_padding + to_json(items[i], style, depth + 1);
    }
    return out + padding + "]";
  }
  if (value.is_object()) {
    auto entries = value.as_object().entries;
    if (entries.empty()) return "{}";
    if (style.sort_keys) {
      std::stable_sort(entries.begin(), entries.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
    }
    std::string out = "{";
    for (size_t i = 0; i < entries.size(); ++i) {
      out += (i ? item_separator : "") + child_padding +
             to_json(Value(entries[i].first), style, depth + 1) + key_separator +
             to_json(entries[i].second, style, depth + 1);
    }
    return out + padding + "}";
  }
  fail("Object of type {} is not JSON serializable", value.type_name());
}

std::vector<std::string_view> code_points(std::string_view text) {
  std::vector<std::string_view> out;
  for (size_t i = 0; i < text.size();) {
    const auto lead = static_cast<unsigned char>(text[i]);
    size_t length = lead < 0x80 ? 1 : lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
    length = std::min(length, text.size() - i);
    out.push_back(text.substr(i, length));
    i += length;
  }
  return out;
}

}  // namespace oscar::jinja
