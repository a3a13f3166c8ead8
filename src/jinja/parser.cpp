#include "jinja/parser.h"

#include <charconv>
#include <initializer_list>

#include "util/error.h"

namespace oscar::jinja {
namespace {

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : tokens_(tokens) {}

  StatementList parse_all() {
    StatementList out = parse_statements({});
    require(peek().kind == TokenKind::end, "template line {}: unexpected '{}'", peek().line,
            peek().value);
    return out;
  }

 private:
  struct DepthGuard {
    explicit DepthGuard(Parser& parser) : parser_(parser) {
      require(++parser_.depth_ <= kMaxNestingDepth,
              "template line {}: nested too deeply (more than {} levels)", parser_.peek().line,
              kMaxNestingDepth);
    }
    ~DepthGuard() { --parser_.depth_; }
    Parser& parser_;
  };

  const Token& peek(size_t ahead = 0) const {
    return tokens_[std::min(position_ + ahead, tokens_.size() - 1)];
  }
  const Token& next() {
    const Token& token = peek();
    if (position_ + 1 < tokens_.size()) ++position_;
    return token;
  }
  bool at(TokenKind kind, std::string_view value = {}) const {
    return peek().kind == kind && (value.empty() || peek().value == value);
  }
  bool at_symbol(std::string_view symbol) const { return at(TokenKind::symbol, symbol); }
  bool at_name(std::string_view name) const { return at(TokenKind::name, name); }
  bool accept(TokenKind kind, std::string_view value) {
    if (!at(kind, value)) return false;
    next();
    return true;
  }
  const Token& expect(TokenKind kind, std::string_view value, const char* what) {
    if (!at(kind, value)) {
      fail("template line {}: expected {}, found '{}'", peek().line, what,
           peek().kind == TokenKind::end ? "end of template" : peek().value);
    }
    return next();
  }
  std::string expect_name() { return expect(TokenKind::name, {}, "a name").value; }

  // Statements until a block tag whose keyword is one of `stops` (left unconsumed: the caller
  // reads it), or the end of the template.
  StatementList parse_statements(std::initializer_list<std::string_view> stops) {
    DepthGuard guard(*this);
    StatementList out;
    while (!at(TokenKind::end)) {
      if (at(TokenKind::text)) {
        auto statement = std::make_unique<Statement>();
        statement->line = peek().line;
        statement->text = next().value;
        out.push_back(std::move(statement));
      } else if (at(TokenKind::variable_begin)) {
        auto statement = std::make_unique<Statement>();
        statement->kind = StatementKind::output;
        statement->line = next().line;
        statement->expression = parse_expression();
        expect(TokenKind::variable_end, {}, "'}}'");
        out.push_back(std::move(statement));
      } else {
        expect(TokenKind::block_begin, {}, "a tag");
        for (const std::string_view stop : stops) {
          if (at_name(stop)) return out;
        }
        if (auto statement = parse_block()) out.push_back(std::move(statement));
      }
    }
    if (stops.size() != 0)
      fail("template line {}: missing '{{% {} %}}'", peek().line, *(stops.end() - 1));
    return out;
  }

  void end_tag() { expect(TokenKind::block_end, {}, "'%}'"); }
  void end_block(std::string_view keyword) {
    expect(TokenKind::name, keyword, keyword.data());
    end_tag();
  }

  std::unique_ptr<Statement> parse_block() {
    auto statement = std::make_unique<Statement>();
    statement->line = peek().line;
    const std::string keyword = expect_name();
    if (keyword == "set") {
      parse_set(*statement);
    } else if (keyword == "if") {
      statement->kind = StatementKind::if_chain;
      statement->conditions.push_back(parse_expression());
      end_tag();
      while (true) {
        statement->branches.push_back(parse_statements({"elif", "else", "endif"}));
        const std::string which = next().value;
        if (which == "elif") {
          statement->conditions.push_back(parse_expression());
          end_tag();
        } else if (which == "else") {
          end_tag();
          statement->branches.push_back(parse_statements({"endif"}));
          end_block("endif");
          break;
        } else {
          end_tag();
          break;
        }
      }
    } else if (keyword == "for") {
      statement->kind = StatementKind::for_loop;
      statement->targets = parse_targets();
      expect(TokenKind::name, "in", "'in'");
      statement->expression = parse_or_test(/*allow_conditional=*/false);
      if (accept(TokenKind::name, "if")) statement->condition = parse_expression();
      end_tag();
      statement->body = parse_statements({"else", "endfor"});
      if (accept(TokenKind::name, "else")) {
        end_tag();
        statement->else_body = parse_statements({"endfor"});
      }
      end_block("endfor");
    } else if (keyword == "macro") {
      statement->kind = StatementKind::macro;
      statement->text = expect_name();
      expect(TokenKind::symbol, "(", "'('");
      while (!accept(TokenKind::symbol, ")")) {
        std::string name = expect_name();
        ExpressionPtr fallback = accept(TokenKind::symbol, "=") ? parse_expression() : nullptr;
        statement->parameters.emplace_back(std::move(name), std::move(fallback));
        if (!at_symbol(")")) expect(TokenKind::symbol, ",", "',' or ')'");
      }
      end_tag();
      statement->body = parse_statements({"endmacro"});
      end_block("endmacro");
    } else if (keyword == "break" || keyword == "continue") {
      statement->kind =
          keyword == "break" ? StatementKind::loop_break : StatementKind::loop_continue;
      end_tag();
    } else if (keyword == "generation") {
      // transformers' marker of the assistant's tokens; it renders its body unchanged.
      end_tag();
      auto body = parse_statements({"endgeneration"});
      end_block("endgeneration");
      statement->kind = StatementKind::if_chain;
      statement->conditions.push_back(literal(Value(true), statement->line));
      statement->branches.push_back(std::move(body));
    } else {
      fail("template line {}: unknown tag '{}'", statement->line, keyword);
    }
    return statement;
  }

  void parse_set(Statement& statement) {
    statement.kind = StatementKind::set;
    statement.targets = parse_targets();
    if (statement.targets.size() == 1 && accept(TokenKind::symbol, "."))
      statement.attribute = expect_name();
    if (at(TokenKind::block_end)) {
      end_tag();
      statement.kind = StatementKind::set_block;
      statement.body = parse_statements({"endset"});
      end_block("endset");
      return;
    }
    expect(TokenKind::symbol, "=", "'='");
    statement.expression = parse_tuple_or_expression();
    end_tag();
  }

  std::vector<std::string> parse_targets() {
    std::vector<std::string> names;
    const bool parenthesised = accept(TokenKind::symbol, "(");
    do {
      names.push_back(expect_name());
    } while (accept(TokenKind::symbol, ","));
    if (parenthesised) expect(TokenKind::symbol, ")", "')'");
    return names;
  }

  static ExpressionPtr literal(Value value, int line) {
    auto e = std::make_unique<Expression>();
    e->value = std::move(value);
    e->line = line;
    return e;
  }
  static ExpressionPtr node(ExpressionKind kind, int line, std::string name = {}) {
    auto e = std::make_unique<Expression>();
    e->kind = kind;
    e->line = line;
    e->name = std::move(name);
    return e;
  }

  // `a, b` (a tuple) where a statement allows one, else one expression.
  ExpressionPtr parse_tuple_or_expression() {
    ExpressionPtr first = parse_expression();
    if (!at_symbol(",")) return first;
    auto tuple = node(ExpressionKind::tuple, first->line);
    tuple->items.push_back(std::move(first));
    while (accept(TokenKind::symbol, ",")) tuple->items.push_back(parse_expression());
    return tuple;
  }

  ExpressionPtr parse_expression() { return parse_or_test(true); }

  ExpressionPtr parse_or_test(bool allow_conditional) {
    DepthGuard guard(*this);
    ExpressionPtr value = parse_binary(0);
    if (allow_conditional && at_name("if")) {
      auto conditional = node(ExpressionKind::conditional, next().line);
      conditional->items.push_back(std::move(value));
      conditional->items.push_back(parse_binary(0));
      conditional->items.push_back(accept(TokenKind::name, "else") ? parse_or_test(true) : nullptr);
      return conditional;
    }
    return value;
  }

  // Binary operators by precedence level, loosest first: or; and; comparisons and in; ~; + -;
  // * / // %; **. `not` binds between `and` and the comparisons.
  ExpressionPtr parse_binary(int level) {
    DepthGuard guard(*this);
    if (level == 2 && at_name("not")) {
      auto e = node(ExpressionKind::unary, next().line, "not");
      e->items.push_back(parse_binary(2));
      return e;
    }
    if (level == 7) return parse_unary();
    ExpressionPtr left = parse_binary(level + 1);
    while (true) {
      std::string op;
      if (level == 0 && at_name("or"))
        op = "or";
      else if (level == 1 && at_name("and"))
        op = "and";
      else if (level == 3 && at(TokenKind::symbol) && is_comparison(peek().value))
        op = peek().value;
      else if (level == 3 && at_name("in"))
        op = "in";
      else if (level == 3 && at_name("not") && peek(1).kind == TokenKind::name &&
               peek(1).value == "in")
        op = "not in";
      else if (level == 4 && at_symbol("~"))
        op = "~";
      else if (level == 5 && (at_symbol("+") || at_symbol("-")))
        op = peek().value;
      else if (level == 6 &&
               (at_symbol("*") || at_symbol("/") || at_symbol("//") || at_symbol("%")))
        op = peek().value;
      if (op.empty()) return left;
      const int line = next().line;
      if (op == "not in") next();
      auto e = node(ExpressionKind::binary, line, op);
      e->items.push_back(std::move(left));
      e->items.push_back(parse_binary(level == 3 ? 4 : level + 1));
      left = std::move(e);
    }
  }

  static bool is_comparison(const std::string& symbol) {
    return symbol == "==" || symbol == "!=" || symbol == "<" || symbol == ">" || symbol == "<=" ||
           symbol == ">=";
  }

  ExpressionPtr parse_unary() {
    DepthGuard guard(*this);
    if (at_symbol("-") || at_symbol("+")) {
      auto e = node(ExpressionKind::unary, peek().line, next().value);
      e->items.push_back(parse_unary());
      return e;
    }
    ExpressionPtr base = parse_postfix(parse_primary());
    if (at_symbol("**")) {
      auto e = node(ExpressionKind::binary, next().line, "**");
      e->items.push_back(std::move(base));
      e->items.push_back(parse_unary());
      return e;
    }
    return base;
  }

  void parse_call_arguments(Expression& call) {
    while (!accept(TokenKind::symbol, ")")) {
      if (at(TokenKind::name) && peek(1).kind == TokenKind::symbol && peek(1).value == "=") {
        std::string key = next().value;
        next();
        call.keywords.emplace_back(std::move(key), parse_expression());
      } else {
        call.items.push_back(parse_expression());
      }
      if (!at_symbol(")")) expect(TokenKind::symbol, ",", "',' or ')'");
    }
  }

  // Attribute access, subscripts, calls, filters and tests after a primary expression.
  ExpressionPtr parse_postfix(ExpressionPtr value) {
    while (true) {
      const int line = peek().line;
      if (accept(TokenKind::symbol, ".")) {
        auto e = node(ExpressionKind::attribute, line,
                      at(TokenKind::integer) ? next().value : expect_name());
        e->items.push_back(std::move(value));
        value = std::move(e);
      } else if (accept(TokenKind::symbol, "[")) {
        value = parse_subscript(std::move(value), line);
      } else if (accept(TokenKind::symbol, "(")) {
        auto e = node(ExpressionKind::call, line);
        e->items.push_back(std::move(value));
        parse_call_arguments(*e);
        value = std::move(e);
      } else if (accept(TokenKind::symbol, "|")) {
        auto e = node(ExpressionKind::filter, line, expect_name());
        e->items.push_back(std::move(value));
        if (accept(TokenKind::symbol, "(")) parse_call_arguments(*e);
        value = std::move(e);
      } else if (accept(TokenKind::name, "is")) {
        auto e = node(ExpressionKind::test, line);
        e->negated = accept(TokenKind::name, "not");
        e->name = at(TokenKind::name)                  ? next().value
                  : at_symbol("==") || at_symbol("!=") ? next().value
                                                       : expect_name();
        e->items.push_back(std::move(value));
        if (accept(TokenKind::symbol, "(")) {
          parse_call_arguments(*e);
        } else if (at(TokenKind::string) || at(TokenKind::integer) || at(TokenKind::floating) ||
                   (at(TokenKind::name) && !at_name("and") && !at_name("or") && !at_name("else") &&
                    !at_name("if") && !at_name("in") && !at_name("not") && !at_name("is"))) {
          e->items.push_back(parse_primary());  // `is divisibleby 3`, `is equalto 'x'`
        }
        value = std::move(e);
      } else {
        return value;
      }
    }
  }

  ExpressionPtr parse_subscript(ExpressionPtr value, int line) {
    ExpressionPtr bounds[3];
    int part = 0;
    bool is_slice = false;
    while (!accept(TokenKind::symbol, "]")) {
      if (accept(TokenKind::symbol, ":")) {
        is_slice = true;
        require(++part < 3, "template line {}: a slice has at most three parts", line);
      } else {
        require(bounds[part] == nullptr, "template line {}: expected ':' or ']'", line);
        bounds[part] = parse_expression();
      }
    }
    require(is_slice || bounds[0] != nullptr, "template line {}: empty subscript", line);
    auto e = node(is_slice ? ExpressionKind::slice : ExpressionKind::subscript, line);
    e->items.push_back(std::move(value));
    for (int i = 0; i < (is_slice ? 3 : 1); ++i) e->items.push_back(std::move(bounds[i]));
    return e;
  }

  ExpressionPtr parse_primary() {
    DepthGuard guard(*this);
    const Token& token = next();
    const int line = token.line;
    switch (token.kind) {
      case TokenKind::string: {
        std::string text = token.value;
        while (at(TokenKind::string)) text += next().value;  // adjacent literals concatenate
        return literal(Value(std::move(text)), line);
      }
      case TokenKind::integer: {
        int64_t number = 0;
        const auto [end, error] =
            std::from_chars(token.value.data(), token.value.data() + token.value.size(), number);
        require(error == std::errc{}, "template line {}: integer {} is out of range", line,
                token.value);
        return literal(Value(number), line);
      }
      case TokenKind::floating:
        return literal(Value(std::stod(token.value)), line);
      case TokenKind::name:
        if (token.value == "true" || token.value == "True") return literal(Value(true), line);
        if (token.value == "false" || token.value == "False") return literal(Value(false), line);
        if (token.value == "none" || token.value == "None") return literal(Value(nullptr), line);
        return node(ExpressionKind::name, line, token.value);
      case TokenKind::symbol:
        if (token.value == "(") return parse_parenthesised(line);
        if (token.value == "[") return parse_sequence(ExpressionKind::list, "]", line);
        if (token.value == "{") return parse_dict(line);
        break;
      default:
        break;
    }
    fail("template line {}: unexpected '{}'", line,
         token.kind == TokenKind::end ? "end of template" : token.value);
  }

  ExpressionPtr parse_parenthesised(int line) {
    if (accept(TokenKind::symbol, ")")) return node(ExpressionKind::tuple, line);
    ExpressionPtr first = parse_expression();
    if (accept(TokenKind::symbol, ")")) return first;
    auto tuple = node(ExpressionKind::tuple, line);
    tuple->items.push_back(std::move(first));
    while (accept(TokenKind::symbol, ",")) {
      if (at_symbol(")")) break;
      tuple->items.push_back(parse_expression());
    }
    expect(TokenKind::symbol, ")", "')'");
    return tuple;
  }

  ExpressionPtr parse_sequence(ExpressionKind kind, std::string_view close, int line) {
    auto e = node(kind, line);
    while (!accept(TokenKind::symbol, close)) {
      e->items.push_back(parse_expression());
      if (!at_symbol(close)) expect(TokenKind::symbol, ",", "','");
    }
    return e;
  }

  ExpressionPtr parse_dict(int line) {
    auto e = node(ExpressionKind::dict, line);
    while (!accept(TokenKind::symbol, "}")) {
      e->items.push_back(parse_expression());
      expect(TokenKind::symbol, ":", "':'");
      e->items.push_back(parse_expression());
      if (!at_symbol("}")) expect(TokenKind::symbol, ",", "','");
    }
    return e;
  }

  const std::vector<Token>& tokens_;
  size_t position_ = 0;
  int depth_ = 0;
};

}  // namespace

StatementList parse(const std::vector<Token>& tokens) {
  return Parser(tokens).parse_all();
}

}  // namespace oscar::jinja
