#pragma once
// Turns generated token ids into text as they arrive, never releasing half a UTF-8 character:
// bytes of an unfinished character wait for the next token; bytes that can never form a valid
// character become U+FFFD, as in transformers' streaming decode.
#include <cstdint>
#include <string>

namespace oscar {

class Tokenizer;

class StreamingDecoder {
 public:
  explicit StreamingDecoder(const Tokenizer& tokenizer, bool skip_special_tokens = true);

  std::string push(int32_t token);  // the complete characters that this token finished
  std::string flush();              // at the end: what is left (an unfinished tail as U+FFFD)

 private:
  std::string take_complete(bool final);

  const Tokenizer& tokenizer_;
  bool skip_special_tokens_;
  std::string pending_;
  bool at_start_ = true;  // nothing decoded yet: a SentencePiece decoder strips a leading space
};

}  // namespace oscar
