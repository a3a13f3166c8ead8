#include "engine/json_object_grammar.h"

#include <algorithm>
#include <utility>

#include "tokenizer/tokenizer.h"

namespace oscar {

namespace {

constexpr std::string_view kLiterals[] = {"true", "false", "null"};

bool is_space(uint8_t byte) {
  return byte == ' ' || byte == '\t' || byte == '\n' || byte == '\r';
}
bool is_digit(uint8_t byte) {
  return byte >= '0' && byte <= '9';
}
bool is_hex(uint8_t byte) {
  return is_digit(byte) || (byte >= 'a' && byte <= 'f') || (byte >= 'A' && byte <= 'F');
}

}  // namespace

bool JsonObjectGrammar::feed(std::string_view bytes) {
  for (const char c : bytes) {
    if (!feed_byte(uint8_t(c))) return false;
  }
  return true;
}

bool JsonObjectGrammar::whitespace(uint8_t byte) {
  if (!is_space(byte)) {
    whitespace_run_ = 0;
    return false;
  }
  ++whitespace_run_;
  return true;
}

bool JsonObjectGrammar::feed_byte(uint8_t byte) {
  switch (mode_) {
    case Mode::start:
    case Mode::value:
    case Mode::value_or_close:
    case Mode::key_or_close:
    case Mode::key:
    case Mode::colon:
    case Mode::after_value:
      if (whitespace(byte)) return whitespace_run_ <= kMaxWhitespaceRun;
      break;
    default:
      break;
  }
  switch (mode_) {
    case Mode::start:
      return byte == '{' && begin_value(byte);
    case Mode::value:
      return begin_value(byte);
    case Mode::value_or_close:
      return byte == ']' ? close_container() : begin_value(byte);
    case Mode::key_or_close:
      if (byte == '}') return close_container();
      [[fallthrough]];
    case Mode::key:
      if (byte != '"') return false;
      mode_ = Mode::string;
      key_ = true;
      return true;
    case Mode::colon:
      if (byte != ':') return false;
      mode_ = Mode::value;
      return true;
    case Mode::after_value:
      return after_value_byte(byte);
    case Mode::string:
      return string_byte(byte);
    case Mode::escape:
      if (byte == 'u') {
        mode_ = Mode::unicode;
        hex_left_ = 4;
        return true;
      }
      mode_ = Mode::string;
      return byte == '"' || byte == '\\' || byte == '/' || byte == 'b' || byte == 'f' ||
             byte == 'n' || byte == 'r' || byte == 't';
    case Mode::unicode:
      if (!is_hex(byte)) return false;
      if (--hex_left_ == 0) mode_ = Mode::string;
      return true;
    case Mode::number:
      return number_byte(byte);
    case Mode::literal: {
      const std::string_view word = kLiterals[literal_];
      if (byte != uint8_t(word[literal_at_])) return false;
      if (++literal_at_ == word.size()) close_value();
      return true;
    }
    case Mode::done:
      return false;
  }
  return false;
}

bool JsonObjectGrammar::begin_value(uint8_t byte) {
  switch (byte) {
    case '{':
    case '[':
      if (depth_ >= kMaxDepth) return false;
      if (byte == '[') {
        arrays_ |= uint64_t(1) << depth_;
      } else {
        arrays_ &= ~(uint64_t(1) << depth_);
      }
      ++depth_;
      mode_ = byte == '[' ? Mode::value_or_close : Mode::key_or_close;
      return true;
    case '"':
      mode_ = Mode::string;
      key_ = false;
      return true;
    case '-':
      mode_ = Mode::number;
      number_ = Number::sign;
      return true;
    case 't':
    case 'f':
    case 'n':
      mode_ = Mode::literal;
      literal_ = byte == 't' ? 0 : byte == 'f' ? 1 : 2;
      literal_at_ = 1;
      return true;
    default:
      if (!is_digit(byte)) return false;
      mode_ = Mode::number;
      number_ = byte == '0' ? Number::zero : Number::integer;
      return true;
  }
}

bool JsonObjectGrammar::after_value_byte(uint8_t byte) {
  const bool in_array = (arrays_ >> (depth_ - 1)) & 1;
  if (byte == ',') {
    mode_ = in_array ? Mode::value : Mode::key;
    return true;
  }
  return byte == (in_array ? ']' : '}') && close_container();
}

bool JsonObjectGrammar::string_byte(uint8_t byte) {
  if (utf8_left_ > 0) {
    if (byte < utf8_low_ || byte > utf8_high_) return false;
    --utf8_left_;
    utf8_low_ = 0x80;
    utf8_high_ = 0xBF;
    return true;
  }
  if (byte == '"') {
    if (key_) {
      mode_ = Mode::colon;
    } else {
      close_value();
    }
    return true;
  }
  if (byte == '\\') {
    mode_ = Mode::escape;
    return true;
  }
  if (byte < 0x20) return false;  // control characters must be escaped
  if (byte < 0x80) return true;
  // The lead byte of a well-formed UTF-8 sequence (Unicode's table 3-7): the bytes that may follow
  // it, and the range of the first of them, which rules out overlong forms, surrogates and code
  // points past U+10FFFF.
  if (byte < 0xC2 || byte > 0xF4) return false;
  utf8_left_ = byte <= 0xDF ? 1 : byte <= 0xEF ? 2 : 3;
  utf8_low_ = byte == 0xE0 ? 0xA0 : byte == 0xF0 ? 0x90 : 0x80;
  utf8_high_ = byte == 0xED ? 0x9F : byte == 0xF4 ? 0x8F : 0xBF;
  return true;
}

bool JsonObjectGrammar::number_byte(uint8_t byte) {
  const bool digit = is_digit(byte);
  const bool exponent = byte == 'e' || byte == 'E';
  auto to = [&](Number next) {
    number_ = next;
    return true;
  };
  switch (number_) {
    case Number::sign:
      return digit && to(byte == '0' ? Number::zero : Number::integer);
    case Number::dot:
      return digit && to(Number::fraction);
    case Number::exponent:
      if (byte == '+' || byte == '-') return to(Number::exponent_sign);
      return digit && to(Number::exponent_digits);
    case Number::exponent_sign:
      return digit && to(Number::exponent_digits);
    case Number::zero:
    case Number::integer:
      if (digit && number_ == Number::integer) return true;
      if (byte == '.') return to(Number::dot);
      if (exponent) return to(Number::exponent);
      break;
    case Number::fraction:
      if (digit) return true;
      if (exponent) return to(Number::exponent);
      break;
    case Number::exponent_digits:
      if (digit) return true;
      break;
  }
  // The number is whole; the byte belongs to what follows it (a leading zero takes no digit).
  if (digit) return false;
  close_value();
  return feed_byte(byte);
}

bool JsonObjectGrammar::close_container() {
  --depth_;
  close_value();
  return true;
}

void JsonObjectGrammar::close_value() {
  mode_ = depth_ == 0 ? Mode::done : Mode::after_value;
  whitespace_run_ = 0;
}

namespace {

std::vector<std::string> non_special_token_bytes(const Tokenizer& tokenizer, int64_t logit_rows) {
  std::vector<std::string> bytes(size_t(std::max<int64_t>(logit_rows, tokenizer.vocab_size())));
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    if (!tokenizer.is_special(id)) bytes[size_t(id)] = tokenizer.token_bytes(id);
  }
  return bytes;
}

}  // namespace

JsonTokenMask::JsonTokenMask(const Tokenizer& tokenizer, int64_t logit_rows)
    : JsonTokenMask(non_special_token_bytes(tokenizer, logit_rows)) {}

JsonTokenMask::JsonTokenMask(std::vector<std::string> token_bytes)
    : bytes_(std::move(token_bytes)), plain_string_text_(bytes_.size(), 0) {
  JsonObjectGrammar in_string;
  in_string.feed("{\"");
  for (size_t id = 0; id < bytes_.size(); ++id) {
    const std::string& token = bytes_[id];
    if (token.empty()) continue;
    JsonObjectGrammar next = in_string;
    plain_string_text_[id] = next.feed(token) && next.in_string_text();
    by_first_byte_[uint8_t(token[0])].push_back(int32_t(id));
  }
}

void JsonTokenMask::exclude(const JsonObjectGrammar& state, std::vector<int32_t>& excluded) const {
  auto continues = [&](const std::string& token) {
    JsonObjectGrammar next = state;
    return next.feed(token);
  };
  std::vector<uint8_t> allowed(bytes_.size(), 0);
  if (state.in_string_text()) {
    for (size_t id = 0; id < bytes_.size(); ++id) {
      allowed[id] = plain_string_text_[id] || (!bytes_[id].empty() && continues(bytes_[id]));
    }
  } else {
    for (int byte = 0; byte < 256; ++byte) {
      const char c = char(byte);
      if (!continues(std::string(1, c))) continue;
      for (const int32_t id : by_first_byte_[size_t(byte)]) {
        allowed[size_t(id)] = bytes_[size_t(id)].size() == 1 || continues(bytes_[size_t(id)]);
      }
    }
  }
  for (size_t id = 0; id < bytes_.size(); ++id) {
    if (!allowed[id]) excluded.push_back(int32_t(id));
  }
}

}  // namespace oscar
