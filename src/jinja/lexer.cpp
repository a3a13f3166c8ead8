#include "jinja/lexer.h"

#include <cctype>

#include "util/error.h"

namespace oscar::jinja {
namespace {

struct Tag {
  char kind = 0;  // '{' variable, '%' block, '#' comment
  bool strip_before = false, strip_after = false;
  size_t code_begin = 0, code_end = 0;  // the tag's inner text in the source
  size_t start = 0;                     // its opening delimiter
  size_t end = 0;                       // one past its closing delimiter
  int line = 1;
};

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

int count_lines(std::string_view text) {
  int lines = 0;
  for (const char c : text) lines += c == '\n';
  return lines;
}

// Unescapes the string literal starting at source[i] (a quote); i ends past the closing quote.
std::string read_string(std::string_view source, size_t& i, int line) {
  const char quote = source[i++];
  std::string out;
  while (i < source.size() && source[i] != quote) {
    char c = source[i++];
    if (c == '\\' && i < source.size()) {
      const char escaped = source[i++];
      switch (escaped) {
        case 'n':
          c = '\n';
          break;
        case 't':
          c = '\t';
          break;
        case 'r':
          c = '\r';
          break;
        case 'b':
          c = '\b';
          break;
        case 'f':
          c = '\f';
          break;
        case '\\':
        case '\'':
        case '"':
          c = escaped;
          break;
        default:
          out += '\\';
          c = escaped;  // Python keeps unknown escapes as written
      }
    }
    out += c;
  }
  require(i < source.size(), "template line {}: unterminated string", line);
  ++i;
  return out;
}

void tokenize_code(std::string_view source, const Tag& tag, std::vector<Token>& out) {
  int line = tag.line;
  size_t i = tag.code_begin;
  static constexpr std::string_view two_char[] = {"//", "**", "==", "!=", "<=", ">="};
  while (i < tag.code_end) {
    const char c = source[i];
    if (is_space(c)) {
      line += c == '\n';
      ++i;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      const size_t start = i;
      while (i < tag.code_end &&
             (std::isalnum(static_cast<unsigned char>(source[i])) || source[i] == '_'))
        ++i;
      out.push_back({TokenKind::name, std::string(source.substr(start, i - start)), line});
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      const size_t start = i;
      bool floating = false;
      while (i < tag.code_end &&
             (std::isdigit(static_cast<unsigned char>(source[i])) || source[i] == '_' ||
              (source[i] == '.' && !floating && i + 1 < tag.code_end &&
               std::isdigit(static_cast<unsigned char>(source[i + 1]))))) {
        floating |= source[i] == '.';
        ++i;
      }
      std::string digits;
      for (const char d : source.substr(start, i - start)) {
        if (d != '_') digits += d;
      }
      out.push_back({floating ? TokenKind::floating : TokenKind::integer, digits, line});
    } else if (c == '\'' || c == '"') {
      const int start_line = line;
      const size_t start = i;
      std::string value = read_string(source.substr(0, tag.code_end), i, line);
      line += count_lines(source.substr(start, i - start));
      out.push_back({TokenKind::string, std::move(value), start_line});
    } else {
      std::string symbol(1, c);
      for (const std::string_view pair : two_char) {
        if (source.substr(i, 2) == pair) symbol = pair;
      }
      require(std::string_view("()[]{}.,:|+-*/%~=!<>").find(c) != std::string_view::npos &&
                  symbol != "!",
              "template line {}: unexpected character '{}'", line, c);
      i += symbol.size();
      out.push_back({TokenKind::symbol, std::move(symbol), line});
    }
  }
}

// The next tag at or after `from`, or nullopt-like (kind 0) when the rest is text.
Tag find_tag(std::string_view source, size_t from, int line_at_from) {
  Tag tag;
  for (size_t i = from; i + 1 < source.size(); ++i) {
    if (source[i] != '{' || (source[i + 1] != '{' && source[i + 1] != '%' && source[i + 1] != '#'))
      continue;
    tag.kind = source[i + 1];
    tag.start = i;
    tag.line = line_at_from + count_lines(source.substr(from, i - from));
    size_t code = i + 2;
    if (code < source.size() && (source[code] == '-' || source[code] == '+')) {
      tag.strip_before = source[code] == '-';
      ++code;
    }
    const std::string_view closing = tag.kind == '{' ? "}}" : tag.kind == '%' ? "%}" : "#}";
    // A variable tag may hold dict literals and strings with "}}"; find the closing delimiter
    // outside string literals.
    size_t end = code;
    char quote = 0;
    for (; end + 1 < source.size(); ++end) {
      if (quote != 0) {
        if (source[end] == '\\')
          ++end;
        else if (source[end] == quote)
          quote = 0;
      } else if (tag.kind != '#' && (source[end] == '\'' || source[end] == '"')) {
        quote = source[end];
      } else if (source.substr(end, 2) == closing) {
        break;
      }
    }
    require(end + 1 < source.size(), "template line {}: the tag opened here is never closed",
            tag.line);
    tag.code_begin = code;
    tag.code_end = end;
    if (end > code && (source[end - 1] == '-' || source[end - 1] == '+')) {
      tag.strip_after = source[end - 1] == '-';
      --tag.code_end;
    }
    tag.end = end + 2;
    return tag;
  }
  return tag;
}

}  // namespace

std::vector<Token> tokenize(std::string_view source) {
  if (!source.empty() && source.back() == '\n') source.remove_suffix(1);
  std::vector<Token> out;
  size_t position = 0;
  int line = 1;
  const Tag* previous = nullptr;
  Tag last;
  while (position <= source.size()) {
    const Tag tag = find_tag(source, position, line);
    const size_t text_end = tag.kind != 0 ? tag.start : source.size();
    std::string_view text = source.substr(position, text_end - position);
    const int text_line = line;
    line += count_lines(text);
    if (previous != nullptr && previous->strip_after) {
      while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
    } else if (previous != nullptr && previous->kind != '{') {  // trim_blocks
      if (text.starts_with("\r\n"))
        text.remove_prefix(2);
      else if (text.starts_with("\n"))
        text.remove_prefix(1);
    }
    if (tag.kind != 0 && tag.strip_before) {
      while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
    } else if (tag.kind != 0 && tag.kind != '{' && source[tag.start + 2] != '+') {  // lstrip_blocks
      const size_t line_start = text.find_last_of('\n');
      const std::string_view indent =
          line_start == std::string_view::npos ? text : text.substr(line_start + 1);
      const bool at_line_start =
          line_start != std::string_view::npos || (previous == nullptr && position == 0);
      if (at_line_start && indent.find_first_not_of(" \t") == std::string_view::npos) {
        text.remove_suffix(indent.size());
      }
    }
    if (!text.empty()) out.push_back({TokenKind::text, std::string(text), text_line});
    if (tag.kind == 0) break;
    if (tag.kind != '#') {
      out.push_back(
          {tag.kind == '{' ? TokenKind::variable_begin : TokenKind::block_begin, {}, tag.line});
      tokenize_code(source, tag, out);
      out.push_back(
          {tag.kind == '{' ? TokenKind::variable_end : TokenKind::block_end, {}, tag.line});
    }
    line = tag.line + count_lines(source.substr(tag.start, tag.end - tag.start));
    last = tag;
    previous = &last;
    position = tag.end;
  }
  out.push_back({TokenKind::end, {}, line});
  return out;
}

}  // namespace oscar::jinja
