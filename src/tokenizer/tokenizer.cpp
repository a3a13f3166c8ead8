#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <mutex>

#include "tokenizer/byte_level.h"
#include "tokenizer/nfc.h"
#include "tokenizer/tokenizer_json.h"
#include "tokenizer/unicode_data.h"
#include "tokenizer/utf8.h"
#include "util/error.h"
#include "util/file_io.h"

namespace oscar {

// Encoded words, shared by threads (the server encodes concurrently); bounded so a stream of
// unique words cannot grow it without limit.
struct Tokenizer::WordCache {
  static constexpr size_t kMaxEntries = 1 << 18;
  std::mutex mutex;
  std::unordered_map<std::string, std::vector<int32_t>> words;
};

Tokenizer::Tokenizer() : cache_(std::make_unique<WordCache>()) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::load(const std::string& model_dir) {
  Tokenizer t = load_from_file(model_dir + "/tokenizer.json");
  const std::string config = model_dir + "/tokenizer_config.json";
  if (t.is_sentencepiece_ && std::filesystem::exists(config)) t.apply_tokenizer_config(config);
  return t;
}

Tokenizer Tokenizer::load_from_file(const std::string& path) {
  return parse(read_file(path), path);
}

Tokenizer Tokenizer::parse(std::string_view json_text, const std::string& source_name) {
  const TokenizerDefinition definition = parse_tokenizer_json(json_text, source_name);
  Tokenizer t;
  t.pattern_ = definition.pattern;
  t.normalize_nfc_ = definition.normalize_nfc;
  t.ignore_merges_ = definition.ignore_merges;
  t.is_sentencepiece_ = definition.sentencepiece;
  t.sentencepiece_ = definition.sentencepiece_options;
  int32_t max_id = -1;
  for (const auto& [bytes, id] : definition.vocabulary) max_id = std::max(max_id, id);
  for (const auto& added : definition.added_tokens) max_id = std::max(max_id, added.id);
  t.token_bytes_.resize(size_t(max_id + 1));
  t.special_.assign(size_t(max_id + 1), false);
  for (const auto& [bytes, id] : definition.vocabulary) {
    t.token_bytes_[size_t(id)] = bytes;
    t.vocabulary_[bytes] = id;
  }
  if (t.is_sentencepiece_) {
    t.set_up_sentencepiece(source_name);
  } else {
    t.set_up_byte_level(source_name);
  }
  for (size_t rank = 0; rank < definition.merges.size(); ++rank) {
    const auto& [left, right] = definition.merges[rank];
    const auto find = [&](const std::string& bytes, const char* what) {
      const auto it = t.vocabulary_.find(bytes);
      require(it != t.vocabulary_.end(), "{}: model.merges[{}]: {} token is not in the vocabulary",
              source_name, rank, what);
      return it->second;
    };
    const int32_t left_id = find(left, "left");
    const int32_t right_id = find(right, "right");
    const int32_t merged_id = find(left + right, "merged");
    const uint64_t key = (uint64_t(uint32_t(left_id)) << 32) | uint32_t(right_id);
    t.merges_.try_emplace(key, MergeRule{int32_t(rank), merged_id});  // first (best) rank wins
  }
  for (const auto& added : definition.added_tokens) {
    t.token_bytes_[size_t(added.id)] = added.content;
    t.special_[size_t(added.id)] = added.special;
    t.added_tokens_.push_back({added.content, added.id, added.special, added.lstrip, added.rstrip});
  }
  std::stable_sort(
      t.added_tokens_.begin(), t.added_tokens_.end(),
      [](const AddedToken& a, const AddedToken& b) { return a.content.size() > b.content.size(); });
  t.prefix_ids_ = definition.prefix_ids;
  t.suffix_ids_ = definition.suffix_ids;
  return t;
}

void Tokenizer::set_up_byte_level(const std::string& source_name) {
  Tokenizer& t = *this;
  for (int b = 0; b < 256; ++b) {
    const auto it = t.vocabulary_.find(std::string(1, char(b)));
    require(it != t.vocabulary_.end(), "{}: model.vocab has no token for byte 0x{:02x}",
            source_name, b);
    t.byte_ids_[size_t(b)] = it->second;
  }
}

const std::string& Tokenizer::token_bytes(int32_t id) const {
  require(id >= 0 && id < vocab_size(), "token id {} is outside the vocabulary (0..{})", id,
          vocab_size() - 1);
  return token_bytes_[size_t(id)];
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && id < vocab_size() && special_[size_t(id)];
}

std::optional<int32_t> Tokenizer::token_id(std::string_view token) const {
  for (const auto& added : added_tokens_) {
    if (added.content == token) return added.id;
  }
  const auto it = vocabulary_.find(std::string(token));
  if (it == vocabulary_.end()) return std::nullopt;
  return it->second;
}

const Tokenizer::AddedToken* Tokenizer::added_token_at(std::string_view text,
                                                       size_t position) const {
  for (const auto& added : added_tokens_) {
    if (!added.content.empty() &&
        text.compare(position, added.content.size(), added.content) == 0) {
      return &added;
    }
  }
  return nullptr;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  for (size_t i = 0; i < text.size();) {
    const size_t length = utf8_sequence_length(text, i);
    require(length > 0, "invalid UTF-8 at byte {}", i);
    i += length;
  }
  std::vector<int32_t> ids;
  if (add_special_tokens) ids = prefix_ids_;
  // Added tokens split the text first; the pieces between them go through the BPE pipeline.
  size_t segment_start = 0;
  for (size_t i = 0; i < text.size();) {
    const AddedToken* added = added_tokens_.empty() ? nullptr : added_token_at(text, i);
    if (added == nullptr) {
      ++i;
      continue;
    }
    size_t segment_end = i;
    if (added->lstrip) {
      while (segment_end > segment_start && is_whitespace(char32_t(text[segment_end - 1])))
        --segment_end;
    }
    encode_text(text.substr(segment_start, segment_end - segment_start), segment_start == 0, ids);
    ids.push_back(added->id);
    i += added->content.size();
    if (added->rstrip) {
      while (i < text.size() && is_whitespace(char32_t(text[i]))) ++i;
    }
    segment_start = i;
  }
  encode_text(text.substr(segment_start), segment_start == 0, ids);
  if (add_special_tokens) ids.insert(ids.end(), suffix_ids_.begin(), suffix_ids_.end());
  return ids;
}

void Tokenizer::encode_text(std::string_view text, bool at_start, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  if (is_sentencepiece_) {
    encode_sentencepiece(text, at_start, out);
    return;
  }
  std::u32string code_points = decode_utf8(text);
  if (normalize_nfc_) code_points = to_nfc(code_points);
  std::string word;
  for (const auto& [begin, end] : split_pretokens(code_points, pattern_)) {
    word.clear();
    for (size_t i = begin; i < end; ++i) append_utf8(code_points[i], word);
    encode_word(word, out);
  }
}

void Tokenizer::encode_word(std::string_view bytes, std::vector<int32_t>& out) const {
  if (ignore_merges_) {
    const auto whole = vocabulary_.find(std::string(bytes));
    if (whole != vocabulary_.end()) {
      out.push_back(whole->second);
      return;
    }
  }
  {
    const std::lock_guard lock(cache_->mutex);
    const auto cached = cache_->words.find(std::string(bytes));
    if (cached != cache_->words.end()) {
      out.insert(out.end(), cached->second.begin(), cached->second.end());
      return;
    }
  }
  std::vector<int32_t> symbols;
  if (is_sentencepiece_) {
    symbols = sentencepiece_symbols(bytes);
  } else {
    symbols.reserve(bytes.size());
    for (const char c : bytes) symbols.push_back(byte_ids_[static_cast<unsigned char>(c)]);
  }
  merge_symbols(symbols);
  out.insert(out.end(), symbols.begin(), symbols.end());
  const std::lock_guard lock(cache_->mutex);
  if (cache_->words.size() >= WordCache::kMaxEntries) cache_->words.clear();
  cache_->words.emplace(std::string(bytes), std::move(symbols));
}

void Tokenizer::merge_symbols(std::vector<int32_t>& symbols) const {
  // GPT-2 BPE: merge the best-ranked adjacent pair (every occurrence, left to right) until none.
  while (symbols.size() > 1) {
    int32_t best_rank = std::numeric_limits<int32_t>::max();
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      const auto it =
          merges_.find((uint64_t(uint32_t(symbols[i])) << 32) | uint32_t(symbols[i + 1]));
      if (it != merges_.end()) best_rank = std::min(best_rank, it->second.rank);
    }
    if (best_rank == std::numeric_limits<int32_t>::max()) break;
    std::vector<int32_t> merged;
    merged.reserve(symbols.size());
    for (size_t i = 0; i < symbols.size(); ++i) {
      if (i + 1 < symbols.size()) {
        const auto it =
            merges_.find((uint64_t(uint32_t(symbols[i])) << 32) | uint32_t(symbols[i + 1]));
        if (it != merges_.end() && it->second.rank == best_rank) {
          merged.push_back(it->second.merged);
          ++i;
          continue;
        }
      }
      merged.push_back(symbols[i]);
    }
    symbols.swap(merged);
  }
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::string out;
  for (const int32_t id : ids) {
    if (skip_special_tokens && is_special(id)) continue;
    out += token_bytes(id);
  }
  if (sentencepiece_.strip_leading_space && !out.empty() && out[0] == ' ') out.erase(0, 1);
  return out;
}

}  // namespace oscar
