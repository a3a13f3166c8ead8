// oscar's tokenizer on the real Qwen3 and Llama 3.1 tokenizer.json files against the ids of
// Hugging Face's JS tokenizers (@huggingface/transformers), on 3,000 generated lines of code,
// CJK, emoji, whitespace runs, numbers and special tokens (models/reference-chat, made by
// tools/chat_reference/make_reference.mjs). The files there keep the vocabulary and merges those
// lines use, with their ids and order, so they encode the lines exactly as the whole files do.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/test_paths.h"
#include "tokenizer/tokenizer.h"
#include "util/file_io.h"
#include "util/xz.h"

namespace oscar {
namespace {

std::string reference_file(const std::string& name) {
  return testing::source_dir() + "/models/reference-chat/" + name;
}

std::string read_xz(const std::string& path) {
  return decompress_xz(read_file(path), path);
}

class RealTokenizer : public ::testing::TestWithParam<const char*> {};

TEST_P(RealTokenizer, EncodesEveryLineAsHuggingFaceDoes) {
  const std::string name = GetParam();
  static const nlohmann::json reference =
      nlohmann::json::parse(read_xz(reference_file("tokenizer-ids.json.xz")));
  const std::string path = reference_file(name + "-tokenizer.json.xz");
  const Tokenizer tokenizer = Tokenizer::parse(read_xz(path), path);
  const auto& lines = reference["lines"];
  const auto& ids = reference["ids"][name];
  ASSERT_EQ(lines.size(), 3000u);
  size_t matched = 0, compared = 0;
  // Under the sanitizers every fourth line: the same kinds of text, a quarter of the time.
  const size_t stride = testing::kSanitized ? 4 : 1;
  for (size_t i = 0; i < lines.size(); i += stride) {
    ++compared;
    const std::string line = lines[i];
    const std::vector<int32_t> expected = ids[i];
    const std::vector<int32_t> encoded = tokenizer.encode(line, /*add_special_tokens=*/false);
    if (encoded == expected) {
      ++matched;
      EXPECT_EQ(tokenizer.decode(encoded), line) << nlohmann::json(line).dump();
    } else {
      ADD_FAILURE() << name << " line " << i << ": " << nlohmann::json(line).dump() << "\n  ours "
                    << nlohmann::json(encoded).dump() << "\n  hf   "
                    << nlohmann::json(expected).dump();
    }
  }
  std::printf("%s: %zu of %zu lines encode to the reference ids\n", name.c_str(), matched,
              compared);
}

INSTANTIATE_TEST_SUITE_P(QwenAndLlama, RealTokenizer, ::testing::Values("qwen3", "llama-3.1"),
                         [](const ::testing::TestParamInfo<const char*>& case_info) {
                           return std::string(case_info.param) == "qwen3" ? "Qwen3" : "Llama31";
                         });

}  // namespace
}  // namespace oscar
