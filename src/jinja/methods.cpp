// Methods of str, list and dict that chat templates call (`content.split('</think>')`,
// `message.items()`), Python's semantics; the global functions; membership and ordering.
#include <algorithm>
#include <ctime>

#include "jinja/interpreter.h"

namespace oscar::jinja {
namespace {

bool is_python_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

// str.strip/lstrip/rstrip: `characters` (whitespace when undefined or None) removed from the ends.
std::string strip_text(const std::string& text, const Value& characters, bool left, bool right) {
  const bool whitespace = !characters.is_string();
  auto strip = [&](char c) {
    return whitespace ? is_python_space(c) : characters.as_string().find(c) != std::string::npos;
  };
  size_t begin = 0, end = text.size();
  while (left && begin < end && strip(text[begin])) ++begin;
  while (right && end > begin && strip(text[end - 1])) --end;
  return text.substr(begin, end - begin);
}

Value split_text(Interpreter& interpreter, const std::string& text, const Value& separator,
                 const Value& limit) {
  int64_t splits_left = limit.is_int() && limit.as_int() >= 0 ? limit.as_int() : INT64_MAX;
  Array parts;
  if (!separator.is_string()) {  // runs of whitespace, ends ignored
    size_t i = 0;
    while (true) {
      while (i < text.size() && is_python_space(text[i])) ++i;
      if (i == text.size()) break;
      size_t end = i;
      if (splits_left-- == 0) {
        end = text.size();
        while (end > i && is_python_space(text[end - 1])) --end;
      } else {
        while (end < text.size() && !is_python_space(text[end])) ++end;
      }
      parts.emplace_back(text.substr(i, end - i));
      interpreter.count_steps();
      i = end;
    }
    return parts;
  }
  const std::string& sep = separator.as_string();
  require(!sep.empty(), "empty separator");
  size_t start = 0;
  for (size_t found; splits_left-- > 0 && (found = text.find(sep, start)) != std::string::npos;
       start = found + sep.size()) {
    parts.emplace_back(text.substr(start, found - start));
    interpreter.count_steps();
  }
  parts.emplace_back(text.substr(start));
  return parts;
}

bool starts_or_ends_with(const std::string& text, const Value& affix, bool start) {
  if (affix.is_array()) {
    return std::any_of(affix.as_array().begin(), affix.as_array().end(),
                       [&](const Value& one) { return starts_or_ends_with(text, one, start); });
  }
  require(affix.is_string(), "startswith/endswith take a str or a tuple of str, not {}",
          affix.type_name());
  return start ? text.starts_with(affix.as_string()) : text.ends_with(affix.as_string());
}

std::string replace_text(const std::string& text, const std::string& old,
                         const std::string& replacement, int64_t count,
                         const Interpreter& interpreter) {
  if (old.empty()) return text;
  std::string out;
  size_t start = 0;
  for (size_t found; count-- != 0 && (found = text.find(old, start)) != std::string::npos;
       start = found + old.size()) {
    out.append(text, start, found - start);
    out += replacement;
    interpreter.check_size(out.size());
  }
  return out + text.substr(start);
}

std::string change_case(std::string text, bool upper) {
  for (char& c : text)
    c = char(upper ? std::toupper(static_cast<unsigned char>(c))
                   : std::tolower(static_cast<unsigned char>(c)));
  return text;
}

Value string_method(Interpreter& interpreter, const std::string& text, const std::string& name,
                    const Arguments& a) {
  if (name == "strip") return strip_text(text, a.get(0, "chars"), true, true);
  if (name == "lstrip") return strip_text(text, a.get(0, "chars"), true, false);
  if (name == "rstrip") return strip_text(text, a.get(0, "chars"), false, true);
  if (name == "split") return split_text(interpreter, text, a.get(0, "sep"), a.get(1, "maxsplit"));
  if (name == "startswith") return starts_or_ends_with(text, a.get(0, "prefix"), true);
  if (name == "endswith") return starts_or_ends_with(text, a.get(0, "suffix"), false);
  if (name == "upper") return change_case(text, true);
  if (name == "lower") return change_case(text, false);
  if (name == "capitalize")
    return text.empty() ? text
                        : change_case(text.substr(0, 1), true) + change_case(text.substr(1), false);
  if (name == "title") {
    std::string out = text;
    bool word_start = true;
    for (char& c : out) {
      const bool letter = std::isalpha(static_cast<unsigned char>(c));
      if (letter)
        c = char(word_start ? std::toupper(static_cast<unsigned char>(c))
                            : std::tolower(static_cast<unsigned char>(c)));
      word_start = !letter;
    }
    return out;
  }
  if (name == "replace") {
    const Value old = a.get(0, "old"), replacement = a.get(1, "new"), count = a.get(2, "count");
    require(old.is_string() && replacement.is_string(), "str.replace takes two strings");
    return replace_text(text, old.as_string(), replacement.as_string(),
                        count.is_int() ? count.as_int() : -1, interpreter);
  }
  if (name == "find" || name == "count" || name == "index") {
    const Value needle = a.get(0, "sub");
    require(needle.is_string(), "str.{} takes a string", name);
    if (name == "count") {
      int64_t found = 0;
      if (needle.as_string().empty()) return int64_t(code_points(text).size()) + 1;
      for (size_t at = text.find(needle.as_string()); at != std::string::npos;
           at = text.find(needle.as_string(), at + needle.as_string().size())) {
        ++found;
      }
      return found;
    }
    const size_t at = text.find(needle.as_string());
    if (at == std::string::npos) {
      require(name == "find", "substring not found");
      return int64_t(-1);
    }
    return int64_t(code_points(text.substr(0, at)).size());
  }
  if (name == "join") {
    const Value items = a.get(0, "iterable");
    require(items.is_array(), "str.join takes a list");
    std::string out;
    for (size_t i = 0; i < items.as_array().size(); ++i) {
      out += (i ? text : "") + to_string(items.as_array()[i]);
      interpreter.check_size(out.size());
    }
    return out;
  }
  if (name == "isdigit" || name == "isalpha" || name == "isspace") {
    if (text.empty()) return false;
    return std::all_of(text.begin(), text.end(), [&](char c) {
      const auto u = static_cast<unsigned char>(c);
      return name == "isdigit"   ? bool(std::isdigit(u))
             : name == "isalpha" ? bool(std::isalpha(u))
                                 : is_python_space(c);
    });
  }
  return Value::undefined(name);
}

const char* const kStringMethods[] = {"strip",    "lstrip",  "rstrip", "split",      "startswith",
                                      "endswith", "upper",   "lower",  "capitalize", "title",
                                      "replace",  "find",    "count",  "index",      "join",
                                      "isdigit",  "isalpha", "isspace"};

}  // namespace

Value member_function(Interpreter& interpreter, const Value& self, const std::string& name) {
  Interpreter* run = &interpreter;
  if (self.is_string()) {
    if (std::find(std::begin(kStringMethods), std::end(kStringMethods), name) ==
        std::end(kStringMethods)) {
      return Value::undefined(name);
    }
    return make_function(name, [run, self, name](const Arguments& a) {
      return string_method(*run, self.as_string(), name, a);
    });
  }
  if (self.is_object()) {
    if (name == "items" || name == "keys" || name == "values") {
      return make_function(name, [run, self, name](const Arguments&) {
        Array out;
        for (const auto& [key, value] : self.as_object().entries) {
          out.push_back(name == "items"  ? Value(Array{key, value})
                        : name == "keys" ? Value(key)
                                         : value);
        }
        run->count_steps(int64_t(out.size()));
        return Value(std::move(out));
      });
    }
    if (name == "get") {
      return make_function(name, [self](const Arguments& a) {
        const Value key = a.get(0, "key");
        const Value* found = key.is_string() ? self.as_object().find(key.as_string()) : nullptr;
        return found != nullptr ? *found : a.get(1, "default", Value(nullptr));
      });
    }
  }
  if (self.is_array()) {
    if (name == "append") {
      return make_function(name, [run, self](const Arguments& a) {
        run->count_steps();
        Value item = a.get(0, "item");
        run->check_nesting(item);
        self.as_array().push_back(std::move(item));
        return Value(nullptr);
      });
    }
    if (name == "pop") {
      return make_function(name, [self](const Arguments& a) {
        Array& items = self.as_array();
        require(!items.empty(), "pop from empty list");
        const Value at = a.get(0, "index");
        int64_t index = at.is_int() ? at.as_int() : int64_t(items.size()) - 1;
        if (index < 0) index += int64_t(items.size());
        require(index >= 0 && index < int64_t(items.size()), "pop index out of range");
        Value out = items[size_t(index)];
        items.erase(items.begin() + index);
        return out;
      });
    }
  }
  return Value::undefined(name);
}

bool contains(const Value& container, const Value& item) {
  if (container.is_string()) {
    require(item.is_string(), "'in <string>' requires a string on the left, not {}",
            item.type_name());
    return container.as_string().find(item.as_string()) != std::string::npos;
  }
  if (container.is_array()) {
    return std::any_of(container.as_array().begin(), container.as_array().end(),
                       [&](const Value& one) { return equal(one, item); });
  }
  if (container.is_object())
    return item.is_string() && container.as_object().find(item.as_string()) != nullptr;
  if (container.is_undefined()) fail("'{}' is undefined", std::get<Undefined>(container.data).name);
  fail("argument of type '{}' is not iterable", container.type_name());
}

int compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_int() && b.is_int()) return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int();
    return a.as_number() < b.as_number() ? -1 : a.as_number() > b.as_number();
  }
  if (a.is_string() && b.is_string())
    return a.as_string().compare(b.as_string()) < 0 ? -1 : a.as_string() != b.as_string();
  fail("'<' is not supported between '{}' and '{}'", a.type_name(), b.type_name());
}

void add_globals(Interpreter& interpreter, Object& globals) {
  Interpreter* run = &interpreter;
  globals.set("raise_exception", make_function("raise_exception", [](const Arguments& a) -> Value {
                fail("{}", to_string(a.get(0, "message", Value("raise_exception() was called"))));
              }));
  globals.set("range", make_function("range", [run](const Arguments& a) {
                for (const Value& bound : a.positional)
                  require(bound.is_int(), "range() takes integers");
                const size_t n = a.positional.size();
                require(n >= 1 && n <= 3, "range() takes 1 to 3 integers");
                const int64_t start = n == 1 ? 0 : a.positional[0].as_int();
                const int64_t stop = n == 1 ? a.positional[0].as_int() : a.positional[1].as_int();
                const int64_t step = n == 3 ? a.positional[2].as_int() : 1;
                require(step != 0, "range() step must not be zero");
                Array out;
                for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
                  run->count_steps();
                  out.emplace_back(i);
                }
                return Value(std::move(out));
              }));
  auto keywords_object = [run](const Arguments& a, bool is_namespace) {
    Value object = make_object();
    object.as_object().is_namespace = is_namespace;
    if (!a.positional.empty() && a.positional[0].is_object())
      object.as_object().entries = a.positional[0].as_object().entries;
    for (const auto& [key, value] : a.keyword) {
      run->check_nesting(value);
      object.as_object().set(key, value);
    }
    return object;
  };
  globals.set("namespace", make_function("namespace", [keywords_object](const Arguments& a) {
                return keywords_object(a, true);
              }));
  globals.set("dict", make_function("dict", [keywords_object](const Arguments& a) {
                return keywords_object(a, false);
              }));
  globals.set("strftime_now", make_function("strftime_now", [](const Arguments& a) {
                const Value format = a.get(0, "format");
                require(format.is_string() && format.as_string().size() < 256,
                        "strftime_now takes a format string");
                const std::time_t now = std::time(nullptr);
                std::tm utc{};
                gmtime_r(&now, &utc);
                char text[512];
                const size_t length =
                    std::strftime(text, sizeof text, format.as_string().c_str(), &utc);
                return Value(std::string(text, length));
              }));
}

}  // namespace oscar::jinja
