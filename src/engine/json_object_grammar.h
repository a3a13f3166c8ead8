#pragma once
// OpenAI's JSON mode (response_format {"type": "json_object"}): the generated text is held to one
// JSON object (RFC 8259) by masking, at each step, every token whose bytes would leave the text
// no prefix of one. The grammar reads bytes; its state is a few bytes (no heap), so each of the
// vocabulary's tokens is tried on a copy of it.
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace oscar {

class Tokenizer;

class JsonObjectGrammar {
 public:
  // Containers nest at most this deep; whitespace between tokens runs at most this many bytes (a
  // model could otherwise emit blank space until max_tokens).
  static constexpr int kMaxDepth = 64;
  static constexpr int kMaxWhitespaceRun = 16;

  // Feeds `bytes`; false (and the state undefined) where they leave the text no prefix of an
  // object.
  bool feed(std::string_view bytes);
  // The object is closed: nothing more may follow.
  bool complete() const { return mode_ == Mode::done; }
  // Inside a string, between characters: where most of a vocabulary may come.
  bool in_string_text() const { return mode_ == Mode::string && utf8_left_ == 0; }

 private:
  enum class Mode : uint8_t {
    start,           // before the top-level object: whitespace or '{'
    value,           // a value expected (after ':' or ',' in an array)
    value_or_close,  // after '[': a value or ']'
    key_or_close,    // after '{': a key or '}'
    key,             // after ',' in an object: a key
    colon,           // after a key
    after_value,     // ',' or the container's close
    string,          // inside a string (key_ tells which)
    escape,          // after a backslash
    unicode,         // in \uXXXX, hex_left digits to go
    number,          // inside a number (number_ tells where)
    literal,         // inside true, false or null
    done,
  };
  enum class Number : uint8_t {
    sign,
    zero,
    integer,
    dot,
    fraction,
    exponent,
    exponent_sign,
    exponent_digits
  };

  bool feed_byte(uint8_t byte);
  bool whitespace(uint8_t byte);
  bool begin_value(uint8_t byte);
  bool after_value_byte(uint8_t byte);
  bool number_byte(uint8_t byte);
  bool string_byte(uint8_t byte);
  bool close_container();  // the innermost container's close: true
  void close_value();      // a value is whole: the object is done, or its container goes on

  uint64_t arrays_ = 0;  // bit d: the container at depth d + 1 is an array (else an object)
  uint8_t depth_ = 0;
  Mode mode_ = Mode::start;
  Number number_ = Number::sign;
  bool key_ = false;         // the string being read is an object's key
  uint8_t utf8_left_ = 0;    // continuation bytes the current character still needs
  uint8_t utf8_low_ = 0x80;  // the range the next of them must lie in
  uint8_t utf8_high_ = 0xBF;
  uint8_t hex_left_ = 0;
  uint8_t literal_ = 0;     // 0 true, 1 false, 2 null
  uint8_t literal_at_ = 0;  // bytes of it read
  uint8_t whitespace_run_ = 0;
};

// Every token's bytes, to test them against a grammar state: the tokens that may not come next.
// Inside a string the tokens that are plain string text (no quote, backslash or control character,
// whole UTF-8 characters) are taken without a test; elsewhere only the tokens whose first byte the
// state takes are tested (bench/json_token_mask.cpp: docs/bench section (e)).
class JsonTokenMask {
 public:
  // `logit_rows`: the model's vocabulary rows (at least the tokenizer's); rows without a token and
  // special tokens are never allowed.
  JsonTokenMask(const Tokenizer& tokenizer, int64_t logit_rows);
  // Each id's bytes; an empty string is a token that never comes.
  explicit JsonTokenMask(std::vector<std::string> token_bytes);
  // The ids that would leave `state` no prefix of an object, appended to `excluded`.
  void exclude(const JsonObjectGrammar& state, std::vector<int32_t>& excluded) const;
  const std::string& bytes(int32_t token) const { return bytes_[size_t(token)]; }

 private:
  std::vector<std::string> bytes_;          // empty: never allowed
  std::vector<uint8_t> plain_string_text_;  // per token
  std::array<std::vector<int32_t>, 256> by_first_byte_;
};

}  // namespace oscar
