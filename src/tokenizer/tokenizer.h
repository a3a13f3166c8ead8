#pragma once
// A BPE tokenizer read from a Hugging Face tokenizer.json. Byte-level files (Qwen2/Qwen3,
// Llama-3, GPT-2 style): added tokens are matched first, the rest is NFC-normalised when the file
// asks for it, split by the pre-tokenizer pattern, mapped to bytes and merged by rank.
// SentencePiece-style files (Llama 2, Mistral): spaces become "▁", characters are the initial
// symbols (unknown ones fall back to <0xNN> byte tokens), merged by rank.
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer_json.h"

namespace oscar {

class Tokenizer {
 public:
  // <model_dir>/tokenizer.json; for SentencePiece-style files also add_bos_token/add_eos_token
  // from tokenizer_config.json when present (transformers' LlamaTokenizerFast does the same).
  static Tokenizer load(const std::string& model_dir);
  static Tokenizer load_from_file(const std::string& path);
  static Tokenizer parse(std::string_view json_text, const std::string& source_name);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Throws Error on invalid UTF-8. `add_special_tokens` applies the file's post-processor template
  // (for example Llama-3's <|begin_of_text|>), as transformers does by default.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true) const;
  // Raw bytes (may end inside a UTF-8 character); throws Error on an id outside the vocabulary.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  int32_t vocab_size() const { return int32_t(token_bytes_.size()); }
  const std::string& token_bytes(int32_t id) const;
  bool is_special(int32_t id) const;
  std::optional<int32_t> token_id(std::string_view token) const;  // added token or vocabulary entry
  // The decoder drops one leading space of the decoded text (SentencePiece Strip / Metaspace).
  bool strips_leading_space() const { return sentencepiece_.strip_leading_space; }

 private:
  struct AddedToken {
    std::string content;
    int32_t id = 0;
    bool special = false;
    bool lstrip = false;
    bool rstrip = false;
  };
  struct MergeRule {
    int32_t rank = 0;
    int32_t merged = 0;
  };
  struct WordCache;

  Tokenizer();
  void encode_text(std::string_view text, bool at_start, std::vector<int32_t>& out) const;
  void encode_word(std::string_view bytes, std::vector<int32_t>& out) const;
  void encode_sentencepiece(std::string_view text, bool at_start, std::vector<int32_t>& out) const;
  std::vector<int32_t> sentencepiece_symbols(std::string_view piece) const;
  void merge_symbols(std::vector<int32_t>& symbols) const;
  void apply_tokenizer_config(const std::string& path);
  void set_up_byte_level(const std::string& source_name);
  void set_up_sentencepiece(const std::string& source_name);
  const AddedToken* added_token_at(std::string_view text, size_t position) const;

  std::vector<std::string> token_bytes_;  // raw bytes of every id (added tokens: their content)
  std::vector<bool> special_;
  std::unordered_map<std::string, int32_t> vocabulary_;  // raw bytes -> id (BPE model)
  std::unordered_map<uint64_t, MergeRule> merges_;       // (left id << 32 | right id) -> rule
  std::array<int32_t, 256> byte_ids_{};           // byte-level symbols, or <0xNN> ids (-1: none)
  std::vector<AddedToken> added_tokens_;          // longest content first
  std::vector<int32_t> prefix_ids_, suffix_ids_;  // post-processor template around a single text
  SplitPattern pattern_ = SplitPattern::qwen2;
  bool normalize_nfc_ = false;
  bool ignore_merges_ = false;
  bool is_sentencepiece_ = false;
  SentencePieceOptions sentencepiece_;
  int32_t unk_id_ = -1;
  std::unique_ptr<WordCache> cache_;
};

}  // namespace oscar
