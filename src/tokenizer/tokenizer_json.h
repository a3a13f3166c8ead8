#pragma once
// Reading and validating tokenizer.json: every field the tokenizer relies on is checked, and
// anything it cannot honour (another model type, an unknown normaliser, pre-tokenizer pattern or
// decoder) is an Error naming the file and the field. Two kinds of file are read: byte-level BPE
// (GPT-2, Qwen, Llama 3) and SentencePiece BPE exported to tokenizer.json (Llama 2, Mistral).
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/pretokenizer.h"

namespace oscar {

// SentencePiece-style files spell a space as U+2581 ("▁") and fall back to <0xNN> byte tokens.
struct SentencePieceOptions {
  // When a text segment (the text between added tokens) gets a leading "▁": never; only the
  // segment at offset 0 (Metaspace "first"); every segment (Metaspace "always"); every segment,
  // even one already starting with "▁" (the normaliser Prepend("▁")).
  enum class Prepend { never, first, always, always_even_if_marked };
  Prepend prepend = Prepend::never;
  bool split = false;  // Metaspace split = true: every "▁" starts a new word
  bool byte_fallback = false;
  bool fuse_unk = false;
  std::string unk_token;             // empty: none
  bool decode_byte_tokens = false;   // decoder ByteFallback: <0xNN> decodes to that byte
  bool strip_leading_space = false;  // decoder Strip(" ", 1, 0) after Fuse, or Metaspace
};

struct TokenizerDefinition {
  struct AddedToken {
    std::string content;
    int32_t id = 0;
    bool special = false;
    bool lstrip = false;
    bool rstrip = false;
  };
  bool sentencepiece = false;  // vocabulary and merges hold "▁" pieces, not byte-level strings
  SentencePieceOptions sentencepiece_options;
  SplitPattern pattern = SplitPattern::qwen2;
  bool normalize_nfc = false;
  bool ignore_merges = false;
  std::vector<std::pair<std::string, int32_t>> vocabulary;  // raw bytes (or piece) -> id
  std::vector<std::pair<std::string, std::string>> merges;  // raw bytes (or pieces), by rank
  std::vector<AddedToken> added_tokens;
  std::vector<int32_t> prefix_ids, suffix_ids;  // post-processor template of a single text
};

TokenizerDefinition parse_tokenizer_json(std::string_view json_text, const std::string& source);

}  // namespace oscar
