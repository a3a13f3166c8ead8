#include "jinja/interpreter.h"

#include <cmath>

#include <fmt/format.h>

#include "jinja/lexer.h"
#include "jinja/parser.h"

namespace oscar::jinja {
namespace {

[[noreturn]] void rethrow_at(int line, const Error& error) {
  throw TemplateError(fmt::format("template line {}: {}", line, error.what()));
}

// Python's slice bounds for a sequence of `size` items.
std::vector<size_t> slice_indices(int64_t size, const Value& start, const Value& stop,
                                  const Value& step_value) {
  const int64_t step = step_value.is_int() ? step_value.as_int() : 1;
  require(step != 0, "slice step cannot be zero");
  auto bound = [&](const Value& v, int64_t fallback) {
    if (!v.is_int()) return fallback;
    int64_t i = v.as_int();
    if (i < 0) i += size;
    return step > 0 ? std::clamp<int64_t>(i, 0, size) : std::clamp<int64_t>(i, -1, size - 1);
  };
  const int64_t begin = bound(start, step > 0 ? 0 : size - 1),
                end = bound(stop, step > 0 ? size : -1);
  std::vector<size_t> out;
  for (int64_t i = begin; step > 0 ? i < end : i > end; i += step) out.push_back(size_t(i));
  return out;
}

}  // namespace

Interpreter::Interpreter(const RenderLimits& limits) : limits_(limits) {}

void Interpreter::count_steps(int64_t steps) {
  steps_ += steps;
  require(steps_ <= limits_.max_steps, "the template ran more than {} steps (an endless loop?)",
          limits_.max_steps);
}

void Interpreter::check_size(size_t bytes) const {
  require(bytes <= limits_.max_output_bytes, "the template's output passed {} bytes",
          limits_.max_output_bytes);
}

std::string Interpreter::run(const StatementList& statements, std::shared_ptr<Object> globals) {
  scopes_ = {std::move(globals)};
  std::string out;
  execute(statements, out);
  return out;
}

Value Interpreter::lookup(const std::string& name) const {
  for (auto scope = scopes_.rbegin(); scope != scopes_.rend(); ++scope) {
    if (const Value* value = (*scope)->find(name)) return *value;
  }
  return Value::undefined(name);
}

void Interpreter::assign(const std::string& name, Value value) {
  scopes_.back()->set(name, std::move(value));
}

Interpreter::Flow Interpreter::execute(const StatementList& statements, std::string& out) {
  for (const auto& statement : statements) {
    const Flow flow = execute(*statement, out);
    if (flow != Flow::normal) return flow;
  }
  return Flow::normal;
}

Interpreter::Flow Interpreter::execute(const Statement& statement, std::string& out) {
  try {
    count_steps();
    switch (statement.kind) {
      case StatementKind::text:
        out += statement.text;
        break;
      case StatementKind::output:
        out += to_string(evaluate(*statement.expression));
        break;
      case StatementKind::set:
        execute_set(statement, evaluate(*statement.expression));
        break;
      case StatementKind::set_block: {
        std::string captured;
        execute(statement.body, captured);
        execute_set(statement, Value(std::move(captured)));
        break;
      }
      case StatementKind::if_chain:
        for (size_t i = 0; i < statement.branches.size(); ++i) {
          if (i >= statement.conditions.size() || truthy(evaluate(*statement.conditions[i]))) {
            return execute(statement.branches[i], out);
          }
        }
        break;
      case StatementKind::for_loop:
        return execute_for(statement, out);
      case StatementKind::macro:
        assign(statement.text, define_macro(statement));
        break;
      case StatementKind::loop_break:
        return Flow::break_loop;
      case StatementKind::loop_continue:
        return Flow::continue_loop;
    }
    check_size(out.size());
  } catch (const TemplateError&) {
    throw;
  } catch (const Error& error) {
    rethrow_at(statement.line, error);
  }
  return Flow::normal;
}

void Interpreter::execute_set(const Statement& statement, Value value) {
  if (!statement.attribute.empty()) {
    const Value target = lookup(statement.targets[0]);
    require(target.is_object() && target.as_object().is_namespace,
            "cannot set attribute '{}' of '{}': it is not a namespace()", statement.attribute,
            statement.targets[0]);
    target.as_object().set(statement.attribute, std::move(value));
    return;
  }
  if (statement.targets.size() == 1) {
    assign(statement.targets[0], std::move(value));
    return;
  }
  require(value.is_array() && value.as_array().size() == statement.targets.size(),
          "cannot unpack {} into {} names", value.type_name(), statement.targets.size());
  for (size_t i = 0; i < statement.targets.size(); ++i)
    assign(statement.targets[i], value.as_array()[i]);
}

Interpreter::Flow Interpreter::execute_for(const Statement& statement, std::string& out) {
  const Value iterable = evaluate(*statement.expression);
  Array items;
  if (iterable.is_array()) {
    items = iterable.as_array();
  } else if (iterable.is_object()) {
    for (const auto& entry : iterable.as_object().entries) items.emplace_back(entry.first);
  } else if (iterable.is_string()) {
    for (const std::string_view c : code_points(iterable.as_string()))
      items.emplace_back(std::string(c));
  } else if (!iterable.is_undefined() && !iterable.is_none()) {
    fail("'{}' object is not iterable", iterable.type_name());
  }
  auto bind = [&](Object& scope, const Value& item) {
    if (statement.targets.size() == 1) {
      scope.set(statement.targets[0], item);
      return;
    }
    require(item.is_array() && item.as_array().size() == statement.targets.size(),
            "cannot unpack {} into {} names", item.type_name(), statement.targets.size());
    for (size_t i = 0; i < statement.targets.size(); ++i)
      scope.set(statement.targets[i], item.as_array()[i]);
  };
  if (statement.condition != nullptr) {  // `for x in xs if cond`: the loop sees only the kept items
    Array kept;
    for (const Value& item : items) {
      count_steps();
      auto scope = std::make_shared<Object>();
      bind(*scope, item);
      scopes_.push_back(scope);
      const bool keep = truthy(evaluate(*statement.condition));
      scopes_.pop_back();
      if (keep) kept.push_back(item);
    }
    items = std::move(kept);
  }
  if (items.empty()) return execute(statement.else_body, out);
  const int64_t length = int64_t(items.size());
  for (int64_t i = 0; i < length; ++i) {
    count_steps();
    auto scope = std::make_shared<Object>();
    bind(*scope, items[size_t(i)]);
    Value loop = make_object();
    Object& fields = loop.as_object();
    fields.set("index0", i);
    fields.set("index", i + 1);
    fields.set("revindex0", length - 1 - i);
    fields.set("revindex", length - i);
    fields.set("first", i == 0);
    fields.set("last", i == length - 1);
    fields.set("length", length);
    fields.set("previtem", i > 0 ? items[size_t(i - 1)] : Value::undefined("previtem"));
    fields.set("nextitem", i + 1 < length ? items[size_t(i + 1)] : Value::undefined("nextitem"));
    fields.set("cycle", make_function("cycle", [i](const Arguments& arguments) {
                 require(!arguments.positional.empty(), "loop.cycle() needs at least one value");
                 return arguments.positional[size_t(i) % arguments.positional.size()];
               }));
    scope->set("loop", loop);
    scopes_.push_back(scope);
    const Flow flow = execute(statement.body, out);
    scopes_.pop_back();
    if (flow == Flow::break_loop) break;
  }
  return Flow::normal;
}

Value Interpreter::define_macro(const Statement& statement) {
  const Statement* macro = &statement;
  return make_function(statement.text, [this, macro](const Arguments& arguments) {
    require(call_depth_ < limits_.max_call_depth, "macros nest deeper than {} calls",
            limits_.max_call_depth);
    auto scope = std::make_shared<Object>();
    for (size_t i = 0; i < macro->parameters.size(); ++i) {
      const auto& [name, fallback] = macro->parameters[i];
      Value value = arguments.get(i, name);
      if (value.is_undefined() && fallback != nullptr) value = evaluate(*fallback);
      scope->set(name, std::move(value));
    }
    std::vector<std::shared_ptr<Object>> saved = {scopes_.front(), scope};
    std::swap(saved, scopes_);
    ++call_depth_;
    std::string out;
    try {
      execute(macro->body, out);
    } catch (...) {
      --call_depth_;
      std::swap(saved, scopes_);
      throw;
    }
    --call_depth_;
    std::swap(saved, scopes_);
    return Value(std::move(out));
  });
}

void Interpreter::check_nesting(const Value& item, int depth) {
  require(depth < kMaxValueDepth, "lists and dicts nest deeper than {} levels", kMaxValueDepth);
  if (item.is_array()) {
    count_steps(int64_t(item.as_array().size()));
    for (const Value& inner : item.as_array()) check_nesting(inner, depth + 1);
  } else if (item.is_object()) {
    count_steps(int64_t(item.as_object().entries.size()));
    for (const auto& entry : item.as_object().entries) check_nesting(entry.second, depth + 1);
  }
}

Value Interpreter::call(const Value& callee, const Arguments& arguments) {
  if (callee.is_undefined()) fail("'{}' is undefined", std::get<Undefined>(callee.data).name);
  require(callee.is_function(), "'{}' object is not callable", callee.type_name());
  count_steps();
  return callee.as_function().call(arguments);
}

Arguments Interpreter::evaluate_arguments(const Expression& expression, size_t first) {
  Arguments arguments;
  for (size_t i = first; i < expression.items.size(); ++i)
    arguments.positional.push_back(evaluate(*expression.items[i]));
  for (const auto& [name, value] : expression.keywords)
    arguments.keyword.emplace_back(name, evaluate(*value));
  return arguments;
}

Value Interpreter::evaluate(const Expression& expression) {
  try {
    return evaluate_inner(expression);
  } catch (const TemplateError&) {
    throw;
  } catch (const Error& error) {
    rethrow_at(expression.line, error);
  }
}

Value Interpreter::evaluate_inner(const Expression& e) {
  switch (e.kind) {
    case ExpressionKind::literal:
      return e.value;
    case ExpressionKind::name:
      return lookup(e.name);
    case ExpressionKind::list:
    case ExpressionKind::tuple: {
      Array items;
      for (const auto& item : e.items) {
        items.push_back(evaluate(*item));
        check_nesting(items.back());
      }
      count_steps(int64_t(items.size()));
      return items;
    }
    case ExpressionKind::dict: {
      Value object = make_object();
      for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
        const Value key = evaluate(*e.items[i]);
        require(key.is_string(), "dict keys must be strings, not {}", key.type_name());
        Value value = evaluate(*e.items[i + 1]);
        check_nesting(value);
        object.as_object().set(key.as_string(), std::move(value));
      }
      return object;
    }
    case ExpressionKind::attribute: {
      const Value base = evaluate(*e.items[0]);
      if (base.is_undefined()) fail("'{}' is undefined", std::get<Undefined>(base.data).name);
      if (base.is_object()) {
        if (const Value* value = base.as_object().find(e.name)) return *value;
      }
      Value method = member_function(*this, base, e.name);
      if (!method.is_undefined()) return method;
      if (base.is_array() && !e.name.empty() &&
          std::isdigit(static_cast<unsigned char>(e.name[0]))) {
        const size_t index = std::stoul(e.name);
        return index < base.as_array().size() ? base.as_array()[index] : Value::undefined(e.name);
      }
      return Value::undefined(e.name);
    }
    case ExpressionKind::subscript: {
      const Value base = evaluate(*e.items[0]);
      const Value key = evaluate(*e.items[1]);
      if (base.is_undefined()) fail("'{}' is undefined", std::get<Undefined>(base.data).name);
      if (base.is_object()) {
        require(key.is_string(), "dict keys are strings, not {}", key.type_name());
        const Value* value = base.as_object().find(key.as_string());
        return value != nullptr ? *value : Value::undefined(key.as_string());
      }
      if (base.is_array() || base.is_string()) {
        require(key.is_int(), "{} indices must be integers, not {}", base.type_name(),
                key.type_name());
        int64_t index = key.as_int();
        if (base.is_array()) {
          const int64_t size = int64_t(base.as_array().size());
          if (index < 0) index += size;
          return index >= 0 && index < size ? base.as_array()[size_t(index)]
                                            : Value::undefined("index");
        }
        const auto characters = code_points(base.as_string());
        if (index < 0) index += int64_t(characters.size());
        return index >= 0 && index < int64_t(characters.size())
                   ? Value(std::string(characters[size_t(index)]))
                   : Value::undefined("index");
      }
      fail("'{}' object is not subscriptable", base.type_name());
    }
    case ExpressionKind::slice: {
      const Value base = evaluate(*e.items[0]);
      Value bounds[3];
      for (int i = 0; i < 3; ++i) {
        if (e.items[size_t(i) + 1] != nullptr) bounds[i] = evaluate(*e.items[size_t(i) + 1]);
      }
      if (base.is_array()) {
        Array out;
        for (const size_t i :
             slice_indices(int64_t(base.as_array().size()), bounds[0], bounds[1], bounds[2])) {
          out.push_back(base.as_array()[i]);
        }
        count_steps(int64_t(out.size()));
        return out;
      }
      require(base.is_string(), "'{}' object is not subscriptable", base.type_name());
      const auto characters = code_points(base.as_string());
      std::string out;
      for (const size_t i :
           slice_indices(int64_t(characters.size()), bounds[0], bounds[1], bounds[2])) {
        out += characters[i];
      }
      return out;
    }
    case ExpressionKind::call: {
      const Value callee = evaluate(*e.items[0]);
      return call(callee, evaluate_arguments(e, 1));
    }
    case ExpressionKind::filter: {
      const Value input = evaluate(*e.items[0]);
      return apply_filter(*this, e.name, input, evaluate_arguments(e, 1));
    }
    case ExpressionKind::test: {
      const Value input = evaluate(*e.items[0]);
      return apply_test(*this, e.name, input, evaluate_arguments(e, 1)) != e.negated;
    }
    case ExpressionKind::unary: {
      const Value operand = evaluate(*e.items[0]);
      if (e.name == "not") return !truthy(operand);
      require(operand.is_number(), "bad operand type for unary {}: '{}'", e.name,
              operand.type_name());
      if (e.name == "+") return operand;
      return operand.is_int() ? Value(-operand.as_int()) : Value(-operand.as_number());
    }
    case ExpressionKind::binary:
      return evaluate_binary(e);
    case ExpressionKind::conditional:
      if (truthy(evaluate(*e.items[1]))) return evaluate(*e.items[0]);
      return e.items[2] != nullptr ? evaluate(*e.items[2]) : Value::undefined();
  }
  return Value::undefined();
}

Template::Template(std::string_view source)
    : statements_(std::make_unique<StatementList>(parse(tokenize(source)))) {}
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;
Template::~Template() = default;

std::string Template::render(const nlohmann::ordered_json& context,
                             const RenderLimits& limits) const {
  Interpreter interpreter(limits);
  auto globals = std::make_shared<Object>();
  add_globals(interpreter, *globals);
  if (context.is_object()) {
    for (const auto& [key, value] : context.items()) globals->set(key, from_json(value));
  }
  return interpreter.run(*statements_, std::move(globals));
}

}  // namespace oscar::jinja
