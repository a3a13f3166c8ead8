#include "eval/niah.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <random>
#include <set>

#include "util/error.h"

namespace oscar {
namespace {

constexpr const char* kPassKeyIntro =
    "There is an important pass key hidden inside a lot of irrelevant text. Find it and memorize "
    "it.\n\n";
constexpr const char* kSecretIntro =
    "Several secret numbers are hidden in the text below. Remember them.\n\n";

std::string random_digits(std::mt19937_64& rng, int count) {
  std::string digits;
  digits.push_back(char('1' + rng() % 9));  // no leading zero
  while (int(digits.size()) < count) digits.push_back(char('0' + rng() % 10));
  return digits;
}

// Lowercase words of 4-10 letters from the filler, the vocabulary of the secret-number keys.
std::vector<std::string> key_words(const std::vector<std::string>& documents) {
  std::set<std::string> words;
  for (const std::string& document : documents) {
    std::string word;
    for (const char c : document + " ") {
      if (std::islower(static_cast<unsigned char>(c))) {
        word.push_back(c);
      } else {
        if (word.size() >= 4 && word.size() <= 10) words.insert(word);
        word.clear();
      }
    }
    if (words.size() > 2000) break;
  }
  return {words.begin(), words.end()};
}

class PromptBuilder {
 public:
  PromptBuilder(const Tokenizer& tokenizer, const std::vector<std::string>& documents)
      : tokenizer_(tokenizer), words_(key_words(documents)) {
    std::string filler;
    for (const std::string& document : documents) filler += document + "\n";
    filler_tokens_ = tokenizer.encode(filler, false);
    require(words_.size() >= 10, "the filler text has too few words for secret-number keys");
  }

  NeedlePrompt build(NeedleFormat format, int64_t target, double depth,
                     std::mt19937_64& rng) const {
    NeedlePrompt prompt;
    prompt.format = format;
    prompt.target_tokens = target;
    prompt.depth = depth;
    std::vector<std::pair<double, std::string>> needles;  // (depth, line)
    std::string intro, question;
    if (format == NeedleFormat::pass_key) {
      prompt.answer = random_digits(rng, 5);
      needles.emplace_back(depth, "\nThe pass key is " + prompt.answer + ". Remember it. " +
                                      prompt.answer + " is the pass key.\n");
      intro = kPassKeyIntro;
      question = "\nWhat is the pass key? The pass key is ";
    } else {
      const int count = 2 + int(rng() % 5);
      std::vector<std::string> keys;
      while (int(keys.size()) < count) {
        const std::string& word = words_[rng() % words_.size()];
        if (std::find(keys.begin(), keys.end(), word) == keys.end()) keys.push_back(word);
      }
      for (int i = 0; i < count; ++i) {
        const std::string value = random_digits(rng, 4 + int(rng() % 3));
        // The asked-for needle sits at `depth`; the others at random depths.
        const double at = i == 0 ? depth : double(rng() % 1001) / 1000.0;
        needles.emplace_back(at,
                             "\nThe secret number for " + keys[size_t(i)] + " is " + value + ".\n");
        if (i == 0) prompt.answer = value;
      }
      intro = kSecretIntro;
      question = "\nWhat is the secret number for " + keys[0] + "? The secret number for " +
                 keys[0] + " is ";
    }
    // Filler tokens to fill the target context, from a random offset of the corpus.
    int64_t fixed = int64_t(tokenizer_.encode(intro + question, false).size());
    for (const auto& needle : needles)
      fixed += int64_t(tokenizer_.encode(needle.second, false).size());
    const int64_t filler_count = std::max<int64_t>(16, target - fixed);
    require(int64_t(filler_tokens_.size()) > filler_count + 1,
            "not enough filler text for {} tokens", target);
    const size_t start = size_t(rng() % (filler_tokens_.size() - size_t(filler_count)));
    std::sort(needles.begin(), needles.end());
    prompt.text = intro;
    int64_t placed = 0;
    for (const auto& [needle_depth, line] : needles) {
      const int64_t until = int64_t(needle_depth * double(filler_count));
      prompt.text += filler_text(start + size_t(placed), start + size_t(until));
      prompt.text += line;
      placed = until;
    }
    prompt.text += filler_text(start + size_t(placed), start + size_t(filler_count));
    prompt.text += question;
    return prompt;
  }

 private:
  // Filler tokens decoded back to text, trimmed to whole UTF-8 characters at both ends.
  std::string filler_text(size_t begin, size_t end) const {
    std::string text = tokenizer_.decode(std::span(filler_tokens_).subspan(begin, end - begin));
    while (!text.empty() && (static_cast<unsigned char>(text.front()) & 0xc0) == 0x80)
      text.erase(0, 1);
    size_t cut = text.size();
    for (size_t back = 1; back <= std::min<size_t>(4, text.size()); ++back) {
      const auto byte = static_cast<unsigned char>(text[text.size() - back]);
      if ((byte & 0xc0) == 0xc0) {
        const size_t needed = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : 2;
        if (back < needed) cut = text.size() - back;
        break;
      }
      if ((byte & 0x80) == 0) break;
    }
    text.resize(cut);
    return text;
  }

  const Tokenizer& tokenizer_;
  std::vector<std::string> words_;
  std::vector<int32_t> filler_tokens_;
};

}  // namespace

bool continuation_matches(const std::string& continuation, const std::string& answer) {
  size_t i = 0;
  while (i < continuation.size() && continuation[i] == ' ') ++i;
  std::string digits;
  while (i < continuation.size() && std::isdigit(static_cast<unsigned char>(continuation[i]))) {
    digits.push_back(continuation[i++]);
  }
  return digits == answer;
}

std::vector<NeedlePrompt> build_needle_prompts(const Tokenizer& tokenizer,
                                               const std::vector<std::string>& filler_documents,
                                               const NiahOptions& options) {
  const PromptBuilder builder(tokenizer, filler_documents);
  std::mt19937_64 rng(options.seed);
  std::vector<NeedlePrompt> prompts;
  for (const NeedleFormat format : {NeedleFormat::pass_key, NeedleFormat::secret_numbers}) {
    for (const int64_t context : options.context_tokens) {
      for (const double depth : options.depths) {
        for (int64_t i = 0; i < options.prompts_per_cell; ++i) {
          prompts.push_back(builder.build(format, context, depth, rng));
        }
      }
    }
  }
  return prompts;
}

NiahResult evaluate_niah(Engine& engine, const Tokenizer& tokenizer,
                         const std::vector<NeedlePrompt>& prompts, const NiahOptions& options) {
  std::map<RequestId, size_t> prompt_of;
  for (size_t i = 0; i < prompts.size(); ++i) {
    GenerationRequest request;
    request.prompt = tokenizer.encode(prompts[i].text);
    request.sampling.temperature = 0;
    request.stop.max_tokens = options.answer_tokens;
    request.full_precision_prefill = options.full_precision_prefill;
    prompt_of[engine.submit(std::move(request))] = i;
  }
  std::vector<std::string> continuations(prompts.size());
  while (!engine.idle()) {
    for (const RequestOutput& output : engine.step()) {
      require(output.finish_reason != FinishReason::error, "needle prompt failed: {}",
              output.error);
      continuations[prompt_of.at(output.id)] += output.text;
    }
  }
  NiahResult result;
  std::map<std::tuple<int, int64_t, double>, NiahCell> cells;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const NeedlePrompt& p = prompts[i];
    NiahCell& cell = cells[{int(p.format), p.target_tokens, p.depth}];
    cell.format = p.format;
    cell.context_tokens = p.target_tokens;
    cell.depth = p.depth;
    const bool correct = continuation_matches(continuations[i], p.answer);
    cell.correct += correct;
    ++cell.total;
    result.correct += correct;
    ++result.total;
  }
  for (const auto& [key, cell] : cells) result.cells.push_back(cell);
  return result;
}

}  // namespace oscar
