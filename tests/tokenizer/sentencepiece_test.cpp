// oscar's tokenizer on SentencePiece-style tokenizer.json files (Llama 2, Mistral) against
// @huggingface/transformers: the real Llama 2 file (Prepend/Replace normaliser, byte fallback)
// and its Metaspace variant (the Mistral v0.3 export style), on generated lines of code, CJK,
// emoji, whitespace runs, numbers and characters that need byte fallback (models/reference-chat,
// made by tools/spm_reference/make_spm_reference.mjs).
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "support/test_paths.h"
#include "tokenizer/streaming_decoder.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/file_io.h"
#include "util/xz.h"

namespace oscar {
namespace {

std::string spm_reference_file(const std::string& name) {
  return testing::source_dir() + "/models/reference-chat/" + name;
}

std::string read_spm_xz(const std::string& name) {
  const std::string path = spm_reference_file(name);
  return decompress_xz(read_file(path), path);
}

const nlohmann::json& spm_reference() {
  static const nlohmann::json reference =
      nlohmann::json::parse(read_spm_xz("llama-2-tokenizer-ids.json.xz"));
  return reference;
}

class SentencePieceTokenizer : public ::testing::TestWithParam<const char*> {};

TEST_P(SentencePieceTokenizer, EncodesAndDecodesEveryLineAsHuggingFaceDoes) {
  const std::string name = GetParam();
  const Tokenizer tokenizer =
      Tokenizer::parse(read_spm_xz(name + "-tokenizer.json.xz"), name + "-tokenizer.json");
  const auto& lines = spm_reference()["lines"];
  const auto& ids = spm_reference()["ids"][name];
  const auto& decoded = spm_reference()["decoded"][name];
  ASSERT_GT(lines.size(), 1500u);
  const size_t stride = testing::kSanitized ? 4 : 1;
  size_t matched = 0, compared = 0;
  for (size_t i = 0; i < lines.size(); i += stride) {
    ++compared;
    const std::string line = lines[i];
    const std::vector<int32_t> expected = ids[i];
    const std::vector<int32_t> encoded = tokenizer.encode(line, /*add_special_tokens=*/false);
    if (encoded != expected) {
      ADD_FAILURE() << name << " line " << i << ": " << nlohmann::json(line).dump() << "\n  ours "
                    << nlohmann::json(encoded).dump() << "\n  hf   "
                    << nlohmann::json(expected).dump();
      continue;
    }
    ++matched;
    const std::string expected_text = decoded[i];
    EXPECT_EQ(tokenizer.decode(expected), expected_text) << nlohmann::json(line).dump();
    // Streaming: byte-fallback pieces of one character come out together, once complete.
    StreamingDecoder stream(tokenizer, /*skip_special_tokens=*/false);
    std::string streamed;
    for (const int32_t id : expected) streamed += stream.push(id);
    streamed += stream.flush();
    EXPECT_EQ(streamed, expected_text) << nlohmann::json(line).dump();
  }
  std::printf("%s: %zu of %zu lines encode to the reference ids\n", name.c_str(), matched,
              compared);
}

INSTANTIATE_TEST_SUITE_P(Llama2, SentencePieceTokenizer,
                         ::testing::Values("llama-2", "llama-2-metaspace"),
                         [](const ::testing::TestParamInfo<const char*>& case_info) {
                           return std::string(case_info.param) == "llama-2" ? "Normalizer"
                                                                            : "Metaspace";
                         });

TEST(SentencePieceTokenizer, StreamsByteFallbackCharacterOnlyWhenComplete) {
  const Tokenizer tokenizer = Tokenizer::parse(read_spm_xz("llama-2-tokenizer.json.xz"), "llama-2");
  const std::vector<int32_t> ids = tokenizer.encode("🦀", /*add_special_tokens=*/false);
  ASSERT_EQ(ids.size(), 5u);  // "▁" then the four <0xNN> bytes of U+1F980
  StreamingDecoder stream(tokenizer);
  EXPECT_EQ(stream.push(ids[0]), "");  // the leading space is stripped
  EXPECT_EQ(stream.push(ids[1]), "");
  EXPECT_EQ(stream.push(ids[2]), "");
  EXPECT_EQ(stream.push(ids[3]), "");
  EXPECT_EQ(stream.push(ids[4]), "🦀");
  EXPECT_EQ(stream.flush(), "");
}

// A small hand-made file for what the Llama 2 file does not use (Metaspace split and
// prepend_scheme always/never, fuse_unk, no byte fallback, Metaspace decoder); the expected ids
// and decodes are @huggingface/transformers 4.3.2's on the same file.
constexpr const char* kTinyTokenizer = R"({
  "added_tokens": [{"id": 1, "content": "<s>", "special": true},
                   {"id": 2, "content": "</s>", "special": true}],
  "normalizer": null,
  "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always",
                    "split": true},
  "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always",
              "split": true},
  "model": {"type": "BPE", "unk_token": "<unk>", "fuse_unk": true, "byte_fallback": false,
            "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "<0x41>": 3, "<0xC3>": 4, "<0xA9>": 5,
                      "\u2581": 6, "a": 7, "b": 8, "\u2581a": 9, "\u2581b": 10, "ab": 11,
                      "\u2581ab": 12},
            "merges": ["\u2581 a", "a b", "\u2581a b", "\u2581 b"]}})";

TEST(SentencePieceTokenizer, MetaspaceSplitPrependAndUnknownsAsHuggingFaceDoes) {
  struct TinyCase {
    bool split_and_always;  // else prepend_scheme never, split false, fuse_unk false
    const char* text;
    std::vector<int32_t> ids;
    const char* decoded;
  };
  const std::vector<TinyCase> cases = {
      {true, "ab ab  b", {12, 12, 6, 10}, "ab ab  b"},
      {true, " ab", {12}, "ab"},
      {true, "a\u00e9 xyz b", {9, 0, 6, 0, 10}, "a<unk> <unk> b"},
      {true, "b</s>ab ab", {10, 2, 12, 12}, "b</s> ab ab"},
      {true, "A\u00e9", {6, 0}, "<unk>"},
      {false, "ab ab  b", {11, 12, 6, 10}, "ab ab  b"},
      {false, " ab", {12}, "ab"},
      {false, "a\u00e9 xyz b", {7, 0, 6, 0, 0, 0, 10}, "a<unk> <unk><unk><unk> b"},
      {false, "b</s>ab ab", {8, 2, 11, 12}, "b</s>ab ab"},
      {false, "A\u00e9", {0, 0}, "<unk><unk>"},
  };
  nlohmann::json other = nlohmann::json::parse(kTinyTokenizer);
  other["pre_tokenizer"]["prepend_scheme"] = "never";
  other["pre_tokenizer"]["split"] = false;
  other["model"]["fuse_unk"] = false;
  const Tokenizer split_and_always = Tokenizer::parse(kTinyTokenizer, "tiny");
  const Tokenizer never = Tokenizer::parse(other.dump(), "tiny-never");
  for (const TinyCase& c : cases) {
    const Tokenizer& tokenizer = c.split_and_always ? split_and_always : never;
    EXPECT_EQ(tokenizer.encode(c.text, /*add_special_tokens=*/false), c.ids) << c.text;
    EXPECT_EQ(tokenizer.decode(c.ids), c.decoded) << c.text;
  }
}

// A Mistral-style checkpoint directory: tokenizer.json plus tokenizer_config.json's add_bos_token.
TEST(SentencePieceTokenizer, LoadsModelDirectoryWithTokenizerConfig) {
  const auto dir =
      std::filesystem::temp_directory_path() /
      ("oscar-spm-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  std::filesystem::create_directories(dir);
  write_file_atomically((dir / "tokenizer.json").string(),
                        read_spm_xz("llama-2-metaspace-tokenizer.json.xz"));
  Tokenizer plain = Tokenizer::load(dir.string());
  const std::vector<int32_t> body = plain.encode("Hello world", /*add_special_tokens=*/false);
  std::vector<int32_t> with_bos = {1};
  with_bos.insert(with_bos.end(), body.begin(), body.end());
  EXPECT_EQ(plain.encode("Hello world"), with_bos);  // the file's TemplateProcessing

  write_file_atomically((dir / "tokenizer_config.json").string(),
                        R"({"add_bos_token": false, "add_eos_token": true, "bos_token": "<s>",
                 "eos_token": {"content": "</s>"}})");
  std::vector<int32_t> with_eos = body;
  with_eos.push_back(2);
  EXPECT_EQ(Tokenizer::load(dir.string()).encode("Hello world"), with_eos);

  write_file_atomically((dir / "tokenizer_config.json").string(),
                        R"({"add_bos_token": true, "bos_token": "<nope>"})");
  EXPECT_THROW(
      {
        try {
          Tokenizer::load(dir.string());
        } catch (const Error& error) {
          EXPECT_NE(std::string(error.what()).find("tokenizer_config.json: add_bos_token"),
                    std::string::npos)
              << error.what();
          throw;
        }
      },
      Error);
  std::filesystem::remove_all(dir);
}

// Fields oscar does not implement are refused with the file and field named.
TEST(SentencePieceTokenizer, RefusesWhatItDoesNotImplement) {
  const nlohmann::json real = nlohmann::json::parse(read_spm_xz("llama-2-tokenizer.json.xz"));
  struct RefusalCase {
    const char* field;
    const char* value;  // JSON
    const char* message;
  };
  const std::vector<RefusalCase> cases = {
      {"decoder", R"({"type": "ByteLevel"})", "decoder type ByteLevel is not supported"},
      {"decoder",
       R"({"type": "Sequence", "decoders": [{"type": "Fuse"},
           {"type": "Strip", "content": "x", "start": 1, "stop": 0}]})",
       "decoder step"},
      {"decoder", "null", "decoder is missing"},
      {"pre_tokenizer",
       R"({"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "sometimes"})",
       "pre_tokenizer.prepend_scheme sometimes"},
      {"pre_tokenizer", R"({"type": "Metaspace", "replacement": "_"})",
       "pre_tokenizer.replacement"},
      {"normalizer", R"({"type": "NFKC"})",
       "byte_fallback = true is only supported for SentencePiece-style files"},
  };
  for (const RefusalCase& c : cases) {
    nlohmann::json edited = real;
    edited[c.field] = nlohmann::json::parse(c.value);
    if (std::string(c.field) == "pre_tokenizer") edited["normalizer"] = nullptr;
    try {
      Tokenizer::parse(edited.dump(), "mistral/tokenizer.json");
      ADD_FAILURE() << "accepted " << c.field << " = " << c.value;
    } catch (const Error& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find("mistral/tokenizer.json"), std::string::npos) << message;
      EXPECT_NE(message.find(c.message), std::string::npos) << message;
    }
  }
}

}  // namespace
}  // namespace oscar
