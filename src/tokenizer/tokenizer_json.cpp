#include "tokenizer/tokenizer_json.h"

#include <nlohmann/json.hpp>

#include <set>

#include "tokenizer/byte_level.h"
#include "util/error.h"

namespace oscar {
namespace {

using nlohmann::json;

constexpr int64_t kMaxTokenId = 1 << 24;

const json& field(const json& object, const char* key, const std::string& source,
                  const std::string& path) {
  require(object.is_object(), "{}: {} must be an object", source, path);
  const auto it = object.find(key);
  require(it != object.end(), "{}: missing field {}.{}", source, path, key);
  return *it;
}

bool flag(const json& object, const char* key, bool fallback, const std::string& source,
          const std::string& path) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return fallback;
  require(it->is_boolean(), "{}: {}.{} must be true or false", source, path, key);
  return it->get<bool>();
}

std::string type_of(const json& object, const std::string& source, const std::string& path) {
  const json& type = field(object, "type", source, path);
  require(type.is_string(), "{}: {}.type must be a string", source, path);
  return type.get<std::string>();
}

bool parse_normalizer(const json& normalizer, const std::string& source) {
  if (normalizer.is_null()) return false;
  const std::string type = type_of(normalizer, source, "normalizer");
  if (type == "NFC") return true;
  if (type == "Sequence") {
    bool nfc = false;
    for (const auto& step : field(normalizer, "normalizers", source, "normalizer")) {
      require(type_of(step, source, "normalizer.normalizers[]") == "NFC",
              "{}: normalizer step {} is not supported (only NFC)", source, step.dump());
      nfc = true;
    }
    return nfc;
  }
  fail("{}: normalizer type {} is not supported (only NFC)", source, type);
}

void check_byte_level(const json& step, bool expect_regex, const std::string& source) {
  require(!flag(step, "add_prefix_space", false, source, "pre_tokenizer.ByteLevel"),
          "{}: pre_tokenizer ByteLevel with add_prefix_space = true is not supported", source);
  require(flag(step, "use_regex", true, source, "pre_tokenizer.ByteLevel") == expect_regex,
          "{}: pre_tokenizer ByteLevel use_regex = {} is not supported here", source,
          !expect_regex);
}

SplitPattern parse_pre_tokenizer(const json& pre, const std::string& source) {
  require(!pre.is_null(), "{}: pre_tokenizer is missing (byte-level BPE needs one)", source);
  const std::string type = type_of(pre, source, "pre_tokenizer");
  if (type == "ByteLevel") {
    check_byte_level(pre, true, source);
    return SplitPattern::gpt2;
  }
  require(type == "Sequence", "{}: pre_tokenizer type {} is not supported", source, type);
  const json& steps = field(pre, "pretokenizers", source, "pre_tokenizer");
  require(steps.is_array() && steps.size() == 2,
          "{}: pre_tokenizer.pretokenizers must be [Split, ByteLevel]", source);
  const json& split = steps[0];
  require(type_of(split, source, "pre_tokenizer.pretokenizers[0]") == "Split",
          "{}: pre_tokenizer.pretokenizers[0] must be a Split", source);
  const json& pattern = field(split, "pattern", source, "pre_tokenizer.pretokenizers[0]");
  const auto regex = pattern.is_object() ? pattern.find("Regex") : pattern.end();
  require(regex != pattern.end() && regex->is_string(),
          "{}: pre_tokenizer Split pattern must be a Regex string", source);
  require(!flag(split, "invert", false, source, "pre_tokenizer.pretokenizers[0]"),
          "{}: pre_tokenizer Split with invert = true is not supported", source);
  const auto behavior = split.find("behavior");
  require(behavior == split.end() || *behavior == "Isolated",
          "{}: pre_tokenizer Split behavior must be Isolated", source);
  check_byte_level(steps[1], false, source);
  const auto recognised = recognise_split_pattern(regex->get<std::string>());
  require(recognised.has_value(),
          "{}: pre_tokenizer Split regex is not one oscar implements (GPT-2, Qwen2/3, Llama-3): {}",
          source, regex->get<std::string>());
  return *recognised;
}

constexpr std::string_view kSpaceMarker = "\u2581";  // SentencePiece's "▁"

std::string vocabulary_bytes(const std::string& entry, bool sentencepiece,
                             const std::string& source, const char* where) {
  if (sentencepiece) return entry;  // pieces are plain UTF-8 strings
  const auto bytes = unicode_to_bytes(entry);
  require(bytes.has_value(), "{}: {} entry {} is not byte-level (ByteLevel alphabet)", source,
          where, json(entry).dump());
  return *bytes;
}

void parse_model(const json& model, const std::string& source, TokenizerDefinition& d) {
  const auto type = model.find("type");
  require(type == model.end() || *type == "BPE", "{}: model.type {} is not supported (only BPE)",
          source, type == model.end() ? "" : type->dump());
  const bool byte_fallback = flag(model, "byte_fallback", false, source, "model");
  require(!byte_fallback || d.sentencepiece,
          "{}: model.byte_fallback = true is only supported for SentencePiece-style files "
          "(Metaspace pre_tokenizer or Prepend/Replace normalizer)",
          source);
  d.sentencepiece_options.byte_fallback = byte_fallback;
  d.sentencepiece_options.fuse_unk = flag(model, "fuse_unk", false, source, "model");
  const auto unk = model.find("unk_token");
  if (unk != model.end() && !unk->is_null()) {
    require(unk->is_string(), "{}: model.unk_token must be a string", source);
    d.sentencepiece_options.unk_token = unk->get<std::string>();
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const auto it = model.find(key);
    require(
        it == model.end() || it->is_null() || (it->is_string() && it->get<std::string>().empty()),
        "{}: model.{} is not supported", source, key);
  }
  d.ignore_merges = flag(model, "ignore_merges", false, source, "model");
  const json& vocab = field(model, "vocab", source, "model");
  require(vocab.is_object(), "{}: model.vocab must be an object", source);
  std::set<int32_t> ids;
  for (const auto& [entry, id] : vocab.items()) {
    require(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < kMaxTokenId,
            "{}: model.vocab[{}] must be an id in [0, {}), found {}", source, json(entry).dump(),
            kMaxTokenId, id.dump());
    require(ids.insert(id.get<int32_t>()).second, "{}: model.vocab: id {} is used twice", source,
            id.get<int32_t>());
    d.vocabulary.emplace_back(vocabulary_bytes(entry, d.sentencepiece, source, "model.vocab"),
                              id.get<int32_t>());
  }
  const json& merges = field(model, "merges", source, "model");
  require(merges.is_array(), "{}: model.merges must be a list", source);
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& merge = merges[i];
    std::string left, right;
    if (merge.is_string()) {
      const std::string text = merge.get<std::string>();
      const size_t space = text.find(' ');
      require(space != std::string::npos && space > 0 && space + 1 < text.size(),
              "{}: model.merges[{}] must be \"left right\", found {}", source, i, merge.dump());
      left = text.substr(0, space);
      right = text.substr(space + 1);
    } else {
      require(merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string(),
              "{}: model.merges[{}] must be two strings, found {}", source, i, merge.dump());
      left = merge[0].get<std::string>();
      right = merge[1].get<std::string>();
    }
    d.merges.emplace_back(vocabulary_bytes(left, d.sentencepiece, source, "model.merges"),
                          vocabulary_bytes(right, d.sentencepiece, source, "model.merges"));
  }
}

// ---- SentencePiece-style files (Llama 2, Mistral) ----

bool is_string_pattern(const json& step, const char* key, std::string_view expected) {
  const auto it = step.find(key);
  if (it == step.end()) return false;
  const json& value = it->is_object() && it->contains("String") ? (*it)["String"] : *it;
  return value.is_string() && value.get<std::string>() == expected;
}

// Sequence[Prepend("▁"), Replace(" ", "▁")], the Llama 2 / Mistral v0.1 normaliser.
bool is_prepend_replace_normalizer(const json& normalizer) {
  if (!normalizer.is_object() || normalizer.value("type", "") != "Sequence") return false;
  const auto steps = normalizer.find("normalizers");
  if (steps == normalizer.end() || !steps->is_array() || steps->size() != 2) return false;
  const json& prepend = (*steps)[0];
  const json& replace = (*steps)[1];
  return prepend.value("type", "") == "Prepend" &&
         is_string_pattern(prepend, "prepend", kSpaceMarker) &&
         replace.value("type", "") == "Replace" && is_string_pattern(replace, "pattern", " ") &&
         is_string_pattern(replace, "content", kSpaceMarker);
}

bool is_sentencepiece_file(const json& root) {
  const json pre = root.value("pre_tokenizer", json());
  if (pre.is_object() && pre.value("type", "") == "Metaspace") return true;
  return pre.is_null() && is_prepend_replace_normalizer(root.value("normalizer", json()));
}

// Metaspace's prepend scheme; older exports write add_prefix_space instead (true = always).
SentencePieceOptions::Prepend metaspace_prepend(const json& step, const std::string& source,
                                                const std::string& path) {
  using Prepend = SentencePieceOptions::Prepend;
  const auto scheme = step.find("prepend_scheme");
  if (scheme == step.end() || scheme->is_null()) {
    return flag(step, "add_prefix_space", true, source, path) ? Prepend::always : Prepend::never;
  }
  require(scheme->is_string(), "{}: {}.prepend_scheme must be a string", source, path);
  const std::string name = scheme->get<std::string>();
  if (name == "first") return Prepend::first;
  if (name == "always") return Prepend::always;
  if (name == "never") return Prepend::never;
  fail("{}: {}.prepend_scheme {} is not one of first, always, never", source, path, name);
}

void parse_sentencepiece_splitting(const json& root, const std::string& source,
                                   TokenizerDefinition& d) {
  const json normalizer = root.value("normalizer", json());
  const json pre = root.value("pre_tokenizer", json());
  SentencePieceOptions& options = d.sentencepiece_options;
  if (pre.is_null()) {  // is_sentencepiece_file checked the Prepend/Replace normaliser
    options.prepend = SentencePieceOptions::Prepend::always_even_if_marked;
    return;
  }
  require(normalizer.is_null(),
          "{}: normalizer {} is not supported with a Metaspace pre_tokenizer (only none)", source,
          normalizer.dump());
  require(is_string_pattern(pre, "replacement", kSpaceMarker),
          "{}: pre_tokenizer.replacement must be \"\\u2581\"", source);
  options.prepend = metaspace_prepend(pre, source, "pre_tokenizer");
  options.split = flag(pre, "split", true, source, "pre_tokenizer");
}

// Sequence[Replace("▁", " "), ByteFallback, Fuse, Strip(" ", 1, 0)] or Metaspace.
void parse_sentencepiece_decoder(const json& decoder, const std::string& source,
                                 TokenizerDefinition& d) {
  SentencePieceOptions& options = d.sentencepiece_options;
  require(!decoder.is_null(), "{}: decoder is missing (a SentencePiece-style file needs one)",
          source);
  const std::string type = type_of(decoder, source, "decoder");
  if (type == "Metaspace") {
    require(is_string_pattern(decoder, "replacement", kSpaceMarker),
            "{}: decoder.replacement must be \"\\u2581\"", source);
    options.strip_leading_space =
        metaspace_prepend(decoder, source, "decoder") != SentencePieceOptions::Prepend::never;
    return;
  }
  require(type == "Sequence", "{}: decoder type {} is not supported", source, type);
  bool replaced = false, fused = false;
  for (const auto& step : field(decoder, "decoders", source, "decoder")) {
    const std::string step_type = type_of(step, source, "decoder.decoders[]");
    require(!options.strip_leading_space, "{}: decoder step {} after Strip is not supported",
            source, step.dump());
    if (step_type == "Replace" && is_string_pattern(step, "pattern", kSpaceMarker) &&
        is_string_pattern(step, "content", " ") && !replaced) {
      replaced = true;
    } else if (step_type == "ByteFallback" && !fused) {
      options.decode_byte_tokens = true;
    } else if (step_type == "Fuse") {
      fused = true;
    } else if (step_type == "Strip" && fused && is_string_pattern(step, "content", " ") &&
               step.value("stop", -1) == 0 && step.value("start", -1) <= 1) {
      options.strip_leading_space = step.value("start", 0) == 1;
      if (!options.strip_leading_space) break;
    } else {
      fail(
          "{}: decoder step {} is not supported (expected Replace(\"\\u2581\", \" \"), "
          "ByteFallback, Fuse, Strip(\" \", 1, 0) in that order)",
          source, step.dump());
    }
  }
  require(replaced, "{}: decoder has no Replace(\"\\u2581\", \" \") step", source);
}

void parse_added_tokens(const json& root, const std::string& source, TokenizerDefinition& d) {
  const auto added = root.find("added_tokens");
  if (added == root.end() || added->is_null()) return;
  require(added->is_array(), "{}: added_tokens must be a list", source);
  for (size_t i = 0; i < added->size(); ++i) {
    const json& token = (*added)[i];
    const std::string path = fmt::format("added_tokens[{}]", i);
    const json& id = field(token, "id", source, path);
    const json& content = field(token, "content", source, path);
    require(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < kMaxTokenId,
            "{}: {}.id must be an id in [0, {})", source, path, kMaxTokenId);
    require(content.is_string() && !content.get<std::string>().empty(),
            "{}: {}.content must be a non-empty string", source, path);
    d.added_tokens.push_back(
        {content.get<std::string>(), id.get<int32_t>(), flag(token, "special", false, source, path),
         flag(token, "lstrip", false, source, path), flag(token, "rstrip", false, source, path)});
  }
}

// TemplateProcessing's "single" template: special tokens before and after the text.
void parse_post_processor(const json& post, const std::string& source, TokenizerDefinition& d) {
  if (post.is_null()) return;
  const std::string type = type_of(post, source, "post_processor");
  if (type == "ByteLevel") return;
  if (type == "Sequence") {
    for (const auto& step : field(post, "processors", source, "post_processor")) {
      parse_post_processor(step, source, d);
    }
    return;
  }
  require(type == "TemplateProcessing", "{}: post_processor type {} is not supported", source,
          type);
  const json& single = field(post, "single", source, "post_processor");
  const json& specials = field(post, "special_tokens", source, "post_processor");
  require(single.is_array(), "{}: post_processor.single must be a list", source);
  bool seen_text = false;
  for (const auto& piece : single) {
    if (piece.contains("Sequence")) {
      seen_text = true;
      continue;
    }
    const auto special = piece.find("SpecialToken");
    require(special != piece.end() && special->contains("id"),
            "{}: post_processor.single entry {} is not supported", source, piece.dump());
    const std::string name = (*special)["id"].get<std::string>();
    const auto entry = specials.find(name);
    require(entry != specials.end() && entry->contains("ids") && (*entry)["ids"].is_array(),
            "{}: post_processor.special_tokens has no ids for {}", source, name);
    for (const auto& id : (*entry)["ids"]) {
      require(id.is_number_integer(), "{}: post_processor.special_tokens[{}].ids must be integers",
              source, name);
      (seen_text ? d.suffix_ids : d.prefix_ids).push_back(id.get<int32_t>());
    }
  }
}

}  // namespace

TokenizerDefinition parse_tokenizer_json(std::string_view json_text, const std::string& source) {
  json root;
  try {
    root = json::parse(json_text);
  } catch (const json::exception& error) {
    fail("{}: not valid JSON: {}", source, error.what());
  }
  require(root.is_object(), "{}: expected a JSON object", source);
  TokenizerDefinition d;
  try {
    d.sentencepiece = is_sentencepiece_file(root);
    parse_model(field(root, "model", source, "(root)"), source, d);
    const json decoder = root.value("decoder", json());
    if (d.sentencepiece) {
      parse_sentencepiece_splitting(root, source, d);
      parse_sentencepiece_decoder(decoder, source, d);
    } else {
      d.normalize_nfc = parse_normalizer(root.value("normalizer", json()), source);
      d.pattern = parse_pre_tokenizer(root.value("pre_tokenizer", json()), source);
      require(decoder.is_null() || type_of(decoder, source, "decoder") == "ByteLevel",
              "{}: decoder {} is not supported (only ByteLevel)", source, decoder.dump());
    }
    parse_added_tokens(root, source, d);
    parse_post_processor(root.value("post_processor", json()), source, d);
  } catch (const json::exception& error) {
    // A field of an unexpected JSON type that a check above did not anticipate.
    fail("{}: malformed tokenizer definition: {}", source, error.what());
  }
  int64_t max_id = -1;
  for (const auto& [bytes, id] : d.vocabulary) max_id = std::max<int64_t>(max_id, id);
  for (const auto& added : d.added_tokens) max_id = std::max<int64_t>(max_id, added.id);
  for (const int32_t id : d.prefix_ids)
    require(id >= 0 && id <= max_id, "{}: post_processor id {} is not a token", source, id);
  for (const int32_t id : d.suffix_ids)
    require(id >= 0 && id <= max_id, "{}: post_processor id {} is not a token", source, id);
  return d;
}

}  // namespace oscar
