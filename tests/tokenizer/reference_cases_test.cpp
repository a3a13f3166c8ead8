// The testbed tokenizer against Hugging Face tokenizers' ids (models/testbed/reference).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/test_paths.h"
#include "tokenizer/streaming_decoder.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/file_io.h"

namespace oscar {
namespace {

const Tokenizer& testbed_tokenizer() {
  static const Tokenizer tokenizer = Tokenizer::load(testing::testbed_model_dir());
  return tokenizer;
}

struct Case {
  std::string text;
  std::vector<int32_t> ids;
};

std::vector<Case> reference_cases() {
  const auto root =
      nlohmann::json::parse(read_file(testing::testbed_reference("tokenizer-cases.json")));
  std::vector<Case> cases;
  for (const auto& c : root["cases"])
    cases.push_back({c["text"], c["ids"].get<std::vector<int32_t>>()});
  return cases;
}

TEST(TokenizerReference, EncodesEveryCaseExactly) {
  const auto cases = reference_cases();
  ASSERT_EQ(cases.size(), 46u);
  for (const Case& c : cases) {
    EXPECT_EQ(testbed_tokenizer().encode(c.text), c.ids) << nlohmann::json(c.text).dump();
  }
}

TEST(TokenizerReference, DecodesBackToTheText) {
  for (const Case& c : reference_cases()) {
    EXPECT_EQ(testbed_tokenizer().decode(c.ids), c.text) << nlohmann::json(c.text).dump();
  }
}

TEST(TokenizerReference, StreamingNeverSplitsACharacter) {
  for (const Case& c : reference_cases()) {
    StreamingDecoder decoder(testbed_tokenizer(), /*skip_special_tokens=*/false);
    std::string streamed;
    for (const int32_t id : c.ids) {
      const std::string piece = decoder.push(id);
      // Every piece is whole UTF-8 on its own.
      EXPECT_NO_THROW(testbed_tokenizer().encode(piece)) << nlohmann::json(c.text).dump();
      streamed += piece;
    }
    streamed += decoder.flush();
    EXPECT_EQ(streamed, c.text);
  }
}

TEST(Tokenizer, RejectsInvalidUtf8) {
  for (const std::string& bad :
       {std::string("ab\xff"), std::string("\xc3"), std::string("\xed\xa0\x80"),
        std::string("\xc0\xaf"), std::string("x\xf4\x90\x80\x80")}) {
    EXPECT_THROW(testbed_tokenizer().encode(bad), Error);
  }
  EXPECT_THROW(testbed_tokenizer().decode(std::vector<int32_t>{8192}), Error);
}

TEST(StreamingDecoder, ReplacesBytesThatCannotFormACharacter) {
  const Tokenizer& t = testbed_tokenizer();
  // The single-byte token of 0xe6, a 3-byte lead.
  const int32_t lead = t.token_id("\xe6").value();
  ASSERT_EQ(t.token_bytes(lead), "\xe6");
  StreamingDecoder decoder(t);
  EXPECT_EQ(decoder.push(lead), "");  // waits for the rest of the character
  EXPECT_EQ(decoder.push(t.encode("a")[0]),
            "\xef\xbf\xbd"
            "a");
  EXPECT_EQ(decoder.push(lead), "");
  EXPECT_EQ(decoder.flush(), "\xef\xbf\xbd");
}

}  // namespace
}  // namespace oscar
