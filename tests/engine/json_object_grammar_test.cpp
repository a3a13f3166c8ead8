// JSON mode's grammar: every prefix of a JSON object is taken byte by byte, the object is complete
// exactly when it closes, and the first byte that leaves no object is refused.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/json_object_grammar.h"
#include "support/test_paths.h"
#include "tokenizer/tokenizer.h"

namespace oscar {
namespace {

// The length of the longest prefix of `text` the grammar takes (text.size(): all of it).
size_t taken(std::string_view text) {
  JsonObjectGrammar grammar;
  for (size_t i = 0; i < text.size(); ++i) {
    if (!grammar.feed(text.substr(i, 1))) return i;
  }
  return text.size();
}

bool complete(std::string_view text) {
  JsonObjectGrammar grammar;
  return grammar.feed(text) && grammar.complete();
}

TEST(JsonObjectGrammar, TakesObjectsAndCompletesWhenTheyClose) {
  const std::string documents[] = {
      "{}",
      " {\"a\": 1}",
      "{\"a\":[1,-2.5e+3,0,0.25,1E9,true,false,null,\"x\"],\"b\":{\"c\":{}},\"d\":[]}",
      "{\"esc\\\"aped\": \"\\\\ \\/ \\b\\f\\n\\r\\t \\u00e9\\u20AC\"}",
      "{\"utf8\": \"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"}",
      "{\n  \"nested\": [[[{\"deep\": [0]}]]]\n}",
  };
  for (const std::string& document : documents) {
    ASSERT_TRUE(nlohmann::json::accept(document)) << document;  // the documents themselves are JSON
    EXPECT_EQ(taken(document), document.size()) << document;
    EXPECT_TRUE(complete(document)) << document;
    EXPECT_FALSE(complete(document.substr(0, document.size() - 1))) << document;
    JsonObjectGrammar after;
    ASSERT_TRUE(after.feed(document));
    EXPECT_FALSE(after.feed(" ")) << "nothing may follow the object";
  }
}

TEST(JsonObjectGrammar, RefusesTheFirstByteThatLeavesNoObject) {
  const std::pair<std::string, size_t> cases[] = {
      {"[1]", 0},  // the top level is an object
      {"\"a\"", 0},
      {"{1: 2}", 1},       // keys are strings
      {"{\"a\" 1}", 5},    // a colon after a key
      {"{\"a\": 01}", 7},  // no leading zeros
      {"{\"a\": -}", 7},   // a sign needs a digit
      {"{\"a\": 1.}", 8},  // a point needs a digit
      {"{\"a\": 1e}", 8},  // so does an exponent
      {"{\"a\": tru}", 9},
      {"{\"a\": nul,}", 9},
      {"{\"a\": 1,}", 8},        // no trailing comma in an object
      {"{\"a\": [1,]}", 9},      // nor in an array
      {"{\"a\": [1}", 8},        // brackets close in order
      {"{\"a\": \"x\ny\"}", 8},  // control characters are escaped in strings
      {"{\"a\": \"\\x\"}", 8},   // no such escape
      {"{\"a\": \"\\u12g4\"}", 11},
      {"{\"a\": \"\x80\"}", 7},              // a continuation byte with no lead
      {"{\"a\": \"\xc3(\"}", 8},             // a lead byte without its continuation
      {"{\"a\": \"\xc0\xaf\"}", 7},          // an overlong form
      {"{\"a\": \"\xe0\x80\x80\"}", 8},      // an overlong three-byte form
      {"{\"a\": \"\xed\xa0\x80\"}", 8},      // a surrogate
      {"{\"a\": \"\xf4\x90\x80\x80\"}", 8},  // past U+10FFFF
      {"{\"a\": \"\xe2\x82\xe2\"}", 9},      // a lead byte where a continuation byte belongs
  };
  for (const auto& [text, refused_at] : cases) {
    EXPECT_FALSE(nlohmann::json::accept(text) && nlohmann::json::parse(text).is_object()) << text;
    EXPECT_EQ(taken(text), refused_at) << text;
  }
}

TEST(JsonObjectGrammar, LimitsWhitespaceRunsAndDepth) {
  const std::string blank(JsonObjectGrammar::kMaxWhitespaceRun, ' ');
  EXPECT_TRUE(complete(blank + "{" + blank + "\"a\"" + blank + ":" + blank + "1" + blank + "}"));
  EXPECT_EQ(taken("{" + blank + " }"), 1 + blank.size());
  EXPECT_TRUE(complete("{\"a\": \"" + blank + blank + "\"}"));  // inside strings spaces are text
  std::string deep = "{\"a\":";
  for (int d = 1; d < JsonObjectGrammar::kMaxDepth; ++d) deep += "[";
  EXPECT_EQ(taken(deep + "["), deep.size());
  EXPECT_EQ(taken(deep + "1"), deep.size() + 1);
}

// The token mask: a token is excluded exactly when its bytes leave the text no prefix of an
// object, inside strings (where plain text skips the test) and between values (where the first
// byte picks the tokens tested); special tokens and rows past the tokenizer's vocabulary never
// come.
TEST(JsonTokenMask, ExcludesTheTokensThatBreakTheObject) {
  const Tokenizer tokenizer = Tokenizer::load(testing::testbed_model_dir());
  const int64_t rows = tokenizer.vocab_size() + 3;
  const JsonTokenMask mask(tokenizer, rows);
  const std::vector<int32_t> quote = tokenizer.encode("\"");
  ASSERT_EQ(quote.size(), 1u);
  // Inside a string; after a UTF-8 lead byte and after a backslash; between values.
  for (const std::string text : {"{\"name\": \"ca", "{\"a\": \"caf\xc3", "{\"a\": \"x\\", "{",
                                 "{\"a\": 12", "{\"a\": [1, "}) {
    JsonObjectGrammar state;
    ASSERT_TRUE(state.feed(text)) << text;
    std::vector<int32_t> excluded;
    mask.exclude(state, excluded);
    std::vector<bool> is_excluded(size_t(rows), false);
    for (const int32_t id : excluded) is_excluded[size_t(id)] = true;
    int64_t allowed = 0;
    for (int32_t id = 0; id < rows; ++id) {
      JsonObjectGrammar next = state;
      const bool continues = id < tokenizer.vocab_size() && !tokenizer.is_special(id) &&
                             next.feed(tokenizer.token_bytes(id));
      EXPECT_EQ(is_excluded[size_t(id)], !continues) << text << ": token " << id;
      allowed += continues;
    }
    EXPECT_GT(allowed, 0) << text;
    if (state.in_string_text()) {
      // Inside a string most tokens may come, and the closing quote's token is among them.
      EXPECT_GT(allowed, tokenizer.vocab_size() / 2) << text;
      EXPECT_FALSE(is_excluded[size_t(quote[0])]) << text;
    }
  }
}

}  // namespace
}  // namespace oscar
