// NFC normalisation, the pre-tokenizer patterns on hand-checked splits, and chat formats.
#include <gtest/gtest.h>

#include "tokenizer/chat_template.h"
#include "tokenizer/nfc.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace oscar {
namespace {

TEST(Nfc, ComposesReordersAndKeepsExclusions) {
  struct Case {
    std::u32string input, expected;
  };
  const Case cases[] = {
      {U"e\u0301", U"\u00e9"},             // e + acute -> é
      {U"\u00e9", U"\u00e9"},              // already composed
      {U"a\u0323\u0302", U"\u1ead"},       // a + dot below + circumflex -> ậ
      {U"a\u0302\u0323", U"\u1ead"},       // marks in the other order: reordered first
      {U"\u1100\u1161\u11a8", U"\uac01"},  // Hangul L V T -> 각
      {U"\u0958", U"\u0915\u093c"},        // composition exclusion stays decomposed
      {U"\u212b", U"\u00c5"},              // Angstrom sign (singleton) -> Å
      {U"plain ascii", U"plain ascii"},
  };
  for (const Case& c : cases) EXPECT_EQ(to_nfc(c.input), c.expected) << encode_utf8(c.input);
}

std::vector<std::string> split(const std::string& text, SplitPattern pattern) {
  const std::u32string code_points = decode_utf8(text);
  std::vector<std::string> pieces;
  for (const auto& [begin, end] : split_pretokens(code_points, pattern)) {
    pieces.push_back(encode_utf8(std::u32string_view(code_points).substr(begin, end - begin)));
  }
  return pieces;
}

TEST(Pretokenizer, HandCheckedSplits) {
  using V = std::vector<std::string>;
  EXPECT_EQ(split("Hello  world", SplitPattern::qwen2), (V{"Hello", " ", " world"}));
  EXPECT_EQ(split("I'LL do 12345", SplitPattern::qwen2),
            (V{"I", "'LL", " do", " ", "1", "2", "3", "4", "5"}));
  EXPECT_EQ(split("I'LL do 12345", SplitPattern::llama3), (V{"I", "'LL", " do", " ", "123", "45"}));
  EXPECT_EQ(split("I'LL do 12345", SplitPattern::gpt2), (V{"I", "'", "LL", " do", " 12345"}));
  EXPECT_EQ(split("x;\n\n  y", SplitPattern::qwen2), (V{"x", ";\n\n", " ", " y"}));
  EXPECT_EQ(split("a \n\tb", SplitPattern::qwen2), (V{"a", " \n", "\tb"}));
  EXPECT_EQ(split("end   ", SplitPattern::qwen2), (V{"end", "   "}));
}

TEST(BuiltinChatFormat, ChatMlAndLlama3) {
  const std::vector<ChatMessage> messages = {{"system", "Be brief."}, {"user", "Hi"}};
  EXPECT_EQ(format_chat(messages, ChatFormat::chatml, true),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(format_chat(messages, ChatFormat::llama3, true),
            "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(chat_format_for("Qwen3ForCausalLM"), ChatFormat::chatml);
  EXPECT_EQ(chat_format_for("LlamaForCausalLM"), ChatFormat::llama3);
  const std::vector<ChatMessage> bad = {{"robot", "x"}};
  EXPECT_THROW(format_chat(bad, ChatFormat::chatml, false), Error);
}

}  // namespace
}  // namespace oscar
