// The SentencePiece-style half of Tokenizer (Llama 2, Mistral tokenizer.json files), following
// Hugging Face tokenizers: Prepend/Replace normaliser or Metaspace pre-tokenizer, then BPE over
// characters with byte fallback (models/bpe/model.rs), decoded by Replace/ByteFallback/Strip.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "util/error.h"
#include "util/file_io.h"

namespace oscar {
namespace {

constexpr std::string_view kSentencePieceSpace = "\u2581";

std::string spaces_to_markers(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 8);
  for (const char c : text) {
    if (c == ' ')
      out += kSentencePieceSpace;
    else
      out += c;
  }
  return out;
}

// "<0x0A>" -> 0x0a; -1 for any other piece.
int byte_token_value(std::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return -1;
  int value = 0;
  for (const char c : piece.substr(3, 2)) {
    value *= 16;
    if (c >= '0' && c <= '9')
      value += c - '0';
    else if (c >= 'A' && c <= 'F')
      value += c - 'A' + 10;
    else
      return -1;
  }
  return value;
}

std::string config_token_text(const nlohmann::json& token) {
  if (token.is_object()) return token.value("content", "");
  return token.is_string() ? token.get<std::string>() : "";
}

}  // namespace

void Tokenizer::set_up_sentencepiece(const std::string& source_name) {
  byte_ids_.fill(-1);
  for (const auto& [piece, id] : vocabulary_) {
    const int byte = byte_token_value(piece);
    if (byte >= 0) byte_ids_[size_t(byte)] = id;
    std::string& bytes = token_bytes_[size_t(id)];
    if (byte >= 0 && sentencepiece_.decode_byte_tokens) {
      bytes = std::string(1, char(byte));
      continue;
    }
    for (size_t at = bytes.find(kSentencePieceSpace); at != std::string::npos;
         at = bytes.find(kSentencePieceSpace, at + 1)) {
      bytes.replace(at, kSentencePieceSpace.size(), " ");
    }
  }
  if (!sentencepiece_.unk_token.empty()) {
    const auto unk = vocabulary_.find(sentencepiece_.unk_token);
    require(unk != vocabulary_.end(), "{}: model.unk_token {} is not in model.vocab", source_name,
            sentencepiece_.unk_token);
    unk_id_ = unk->second;
  }
}

void Tokenizer::encode_sentencepiece(std::string_view text, bool at_start,
                                     std::vector<int32_t>& out) const {
  using Prepend = SentencePieceOptions::Prepend;
  std::string marked = spaces_to_markers(text);
  const bool marked_already = marked.starts_with(kSentencePieceSpace);
  const Prepend prepend = sentencepiece_.prepend;
  if (prepend == Prepend::always_even_if_marked ||
      (prepend == Prepend::always && !marked_already) ||
      (prepend == Prepend::first && at_start && !marked_already)) {
    marked.insert(0, kSentencePieceSpace);
  }
  if (!sentencepiece_.split) {
    encode_word(marked, out);
    return;
  }
  // Metaspace split: each "▁" begins a new word (MergedWithNext).
  size_t begin = 0;
  for (size_t at = marked.find(kSentencePieceSpace, 1); at != std::string::npos;
       at = marked.find(kSentencePieceSpace, at + 1)) {
    if (at > begin) encode_word(std::string_view(marked).substr(begin, at - begin), out);
    begin = at;
  }
  encode_word(std::string_view(marked).substr(begin), out);
}

// The initial symbols of a word: one per character, an unknown character as its <0xNN> byte
// tokens (byte fallback) or as the unknown token, consecutive unknowns fused when fuse_unk.
std::vector<int32_t> Tokenizer::sentencepiece_symbols(std::string_view piece) const {
  std::vector<int32_t> symbols;
  bool previous_unknown = false;
  for (size_t i = 0; i < piece.size();) {
    const size_t length = utf8_sequence_length(piece, i);
    const std::string character(piece.substr(i, length));
    i += length;
    const auto known = vocabulary_.find(character);
    if (known != vocabulary_.end()) {
      symbols.push_back(known->second);
      previous_unknown = false;
      continue;
    }
    if (sentencepiece_.byte_fallback) {
      bool all_bytes = true;
      for (const char c : character) all_bytes = all_bytes && byte_ids_[uint8_t(c)] >= 0;
      if (all_bytes) {
        for (const char c : character) symbols.push_back(byte_ids_[uint8_t(c)]);
        previous_unknown = false;
        continue;
      }
    }
    require(unk_id_ >= 0,
            "character {} is not in the vocabulary and the tokenizer has no unk_token", character);
    if (!(sentencepiece_.fuse_unk && previous_unknown)) symbols.push_back(unk_id_);
    previous_unknown = true;
  }
  return symbols;
}

// LlamaTokenizerFast rebuilds the post-processor from add_bos_token / add_eos_token.
void Tokenizer::apply_tokenizer_config(const std::string& path) {
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::exception& error) {
    fail("{}: not valid JSON: {}", path, error.what());
  }
  require(config.is_object(), "{}: expected a JSON object", path);
  const auto set = [&](const char* flag_key, const char* token_key, std::vector<int32_t>& ids) {
    const auto flag = config.find(flag_key);
    if (flag == config.end() || flag->is_null()) return;
    require(flag->is_boolean(), "{}: {} must be true or false", path, flag_key);
    ids.clear();
    if (!flag->get<bool>()) return;
    const std::string text = config_token_text(config.value(token_key, nlohmann::json()));
    const auto id = token_id(text);
    require(!text.empty() && id.has_value(), "{}: {} is true but {} ({}) is not a token", path,
            flag_key, token_key, text);
    ids.push_back(*id);
  };
  set("add_bos_token", "bos_token", prefix_ids_);
  set("add_eos_token", "eos_token", suffix_ids_);
}

}  // namespace oscar
