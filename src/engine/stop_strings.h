#pragma once
// Stop strings over streamed text: text is released only once it can no longer be the start of
// a stop string, and a completed stop string (and anything after it) is never released, as in
// the OpenAI API.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace oscar {

class StopStringMatcher {
 public:
  // `keep_stop`: the stop string itself is released (what follows it never is).
  explicit StopStringMatcher(std::vector<std::string> stop_strings = {}, bool keep_stop = false);

  // Adds newly decoded text; returns the text that may be shown now. With `may_stop` false (before
  // a request's min_tokens) no stop string may end inside `text`; one that starts there and ends in
  // later text still stops, as vLLM's check of the newest characters finds it.
  std::string push(std::string_view text, bool may_stop = true);
  // The end of generation: whatever was held back (nothing after a stop).
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stop_strings_;
  std::string pending_;
  bool keep_stop_ = false;
  size_t unmatchable_ = 0;  // pending_'s first characters, in which no stop string may end
  bool stopped_ = false;
};

}  // namespace oscar
