// Randomised corruption of tokenizer.json: every variant loads or fails with oscar::Error.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <functional>
#include <random>

#include "support/test_paths.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/file_io.h"

namespace oscar {
namespace {

using nlohmann::json;

void expect_loads_or_fails_cleanly(const std::string& text, const std::string& what) {
  try {
    const Tokenizer t = Tokenizer::parse(text, "fuzzed tokenizer.json");
    // What loads must encode and decode without crashing.
    const auto ids = t.encode("Hello world, 123 <|endoftext|> é");
    (void)t.decode(ids);
  } catch (const Error&) {
  } catch (const std::exception& other) {
    ADD_FAILURE() << what << ": threw a non-oscar exception: " << other.what();
  }
}

TEST(TokenizerJsonFuzz, ByteLevelCorruptions) {
  const std::string original = read_file(testing::testbed_model_dir() + "/tokenizer.json");
  std::mt19937 rng(2024);
  for (int trial = 0; trial < 150; ++trial) {
    std::string text = original;
    switch (trial % 3) {
      case 0:  // truncate
        text.resize(std::uniform_int_distribution<size_t>(0, text.size() - 1)(rng));
        break;
      case 1:  // flip bytes
        for (int k = 0; k < 5; ++k) {
          text[std::uniform_int_distribution<size_t>(0, text.size() - 1)(rng)] ^=
              char(1 << std::uniform_int_distribution<int>(0, 7)(rng));
        }
        break;
      default:  // overwrite a run with random printable characters
        for (size_t i = std::uniform_int_distribution<size_t>(0, text.size() - 40)(rng), k = 0;
             k < 30; ++k) {
          text[i + k] = char(std::uniform_int_distribution<int>(32, 126)(rng));
        }
    }
    expect_loads_or_fails_cleanly(text, "trial " + std::to_string(trial));
  }
}

TEST(TokenizerJsonFuzz, StructuralCorruptions) {
  const json original = json::parse(read_file(testing::testbed_model_dir() + "/tokenizer.json"));
  std::mt19937 rng(7);
  const std::vector<std::function<void(json&)>> mutations = {
      [](json& j) { j.erase("model"); },
      [](json& j) { j["model"]["type"] = "WordPiece"; },
      [](json& j) { j["model"]["vocab"] = json::array(); },
      [](json& j) { j["model"]["vocab"]["Ġthe"] = -4; },
      [](json& j) { j["model"]["vocab"]["Ġthe"] = "five"; },
      [](json& j) { j["model"]["vocab"]["\u2603"] = 9000; },
      [](json& j) { j["model"]["merges"][10] = "nospace"; },
      [](json& j) {
        j["model"]["merges"][11] = json::array({"zzzq", "qqq"});
      },
      [](json& j) { j["model"]["merges"][12] = 7; },
      [](json& j) { j["model"]["byte_fallback"] = true; },
      [](json& j) {
        j["normalizer"] = {{"type", "Lowercase"}};
      },
      [](json& j) { j["pre_tokenizer"] = nullptr; },
      [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\w+"; },
      [](json& j) { j["pre_tokenizer"]["pretokenizers"] = json::array(); },
      [](json& j) {
        j["decoder"] = {{"type", "WordPiece"}};
      },
      [](json& j) { j["added_tokens"][0]["id"] = "zero"; },
      [](json& j) { j["added_tokens"][0]["content"] = ""; },
      [](json& j) {
        j["post_processor"]["single"] = json::array({{{"SpecialToken", {{"id", "<s>"}}}}});
      },
      [](json& j) { j = json::array(); },
      [](json& j) { j["model"]["vocab"].erase("a"); },
  };
  for (size_t i = 0; i < mutations.size(); ++i) {
    json mutated = original;
    mutations[i](mutated);
    bool threw = false;
    try {
      Tokenizer::parse(mutated.dump(), "mutated tokenizer.json");
    } catch (const Error& error) {
      threw = true;
      EXPECT_NE(std::string(error.what()).find("mutated tokenizer.json"), std::string::npos)
          << error.what();
    } catch (const std::exception& other) {
      ADD_FAILURE() << "mutation " << i << " threw a non-oscar exception: " << other.what();
    }
    EXPECT_TRUE(threw) << "mutation " << i << " was accepted";
  }
  (void)rng;
}

TEST(TokenizerRandomText, EncodesAndRoundTrips) {
  const Tokenizer t = Tokenizer::load(testing::testbed_model_dir());
  std::mt19937 rng(99);
  const std::vector<std::string> pieces = {"a",
                                           "Z",
                                           " ",
                                           "  ",
                                           "\t",
                                           "\n",
                                           "\r\n",
                                           "7",
                                           "42",
                                           "'s",
                                           "'LL",
                                           "é",
                                           "日本",
                                           "🙂",
                                           "\xc2\xa0",
                                           ".",
                                           "!?",
                                           "_",
                                           "<|endoftext|>",
                                           "(",
                                           "ﬁ",
                                           "Ж",
                                           "٣",
                                           "\u200b",
                                           "x86_64",
                                           "\u3000"};
  for (int trial = 0; trial < 400; ++trial) {
    std::string text;
    const int length = std::uniform_int_distribution<int>(0, 40)(rng);
    for (int k = 0; k < length; ++k) {
      text += pieces[std::uniform_int_distribution<size_t>(0, pieces.size() - 1)(rng)];
    }
    const auto ids = t.encode(text);
    EXPECT_EQ(t.decode(ids), text) << json(text).dump();
  }
}

}  // namespace
}  // namespace oscar
