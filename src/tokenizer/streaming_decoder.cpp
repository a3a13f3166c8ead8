#include "tokenizer/streaming_decoder.h"

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace oscar {
namespace {

constexpr std::string_view kReplacement = "\xef\xbf\xbd";  // U+FFFD

// Could bytes [i, end) still become a valid character once more bytes arrive?
bool is_valid_prefix(std::string_view text, size_t i) {
  const auto lead = static_cast<unsigned char>(text[i]);
  size_t length = 0;
  if (lead >= 0xc2 && lead <= 0xdf)
    length = 2;
  else if (lead >= 0xe0 && lead <= 0xef)
    length = 3;
  else if (lead >= 0xf0 && lead <= 0xf4)
    length = 4;
  else
    return false;
  if (text.size() - i >= length) return false;  // complete length available, so it was invalid
  for (size_t k = i + 1; k < text.size(); ++k) {
    if ((static_cast<unsigned char>(text[k]) & 0xc0) != 0x80) return false;
  }
  // The second byte's range rules (no overlongs or surrogates) once it is known.
  if (text.size() - i >= 2) {
    const auto second = static_cast<unsigned char>(text[i + 1]);
    if (lead == 0xe0 && second < 0xa0) return false;
    if (lead == 0xed && second > 0x9f) return false;
    if (lead == 0xf0 && second < 0x90) return false;
    if (lead == 0xf4 && second > 0x8f) return false;
  }
  return true;
}

}  // namespace

StreamingDecoder::StreamingDecoder(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens) {}

std::string StreamingDecoder::push(int32_t token) {
  if (skip_special_tokens_ && tokenizer_.is_special(token)) return take_complete(false);
  pending_ += tokenizer_.token_bytes(token);
  // Strip(" ", 1, 0) acts once, on the first character of the whole decoded text.
  if (at_start_ && !pending_.empty()) {
    if (tokenizer_.strips_leading_space() && pending_[0] == ' ') pending_.erase(0, 1);
    at_start_ = false;
  }
  return take_complete(false);
}

std::string StreamingDecoder::flush() {
  return take_complete(true);
}

std::string StreamingDecoder::take_complete(bool final) {
  std::string out;
  size_t i = 0;
  while (i < pending_.size()) {
    const size_t length = utf8_sequence_length(pending_, i);
    if (length > 0) {
      out.append(pending_, i, length);
      i += length;
    } else if (!final && is_valid_prefix(pending_, i)) {
      break;  // an unfinished character: wait for more bytes
    } else {
      out += kReplacement;
      ++i;
    }
  }
  pending_.erase(0, i);
  return out;
}

}  // namespace oscar
