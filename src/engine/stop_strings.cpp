#include "engine/stop_strings.h"

#include <algorithm>

namespace oscar {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stop_strings, bool keep_stop)
    : stop_strings_(std::move(stop_strings)), keep_stop_(keep_stop) {
  std::erase_if(stop_strings_, [](const std::string& s) { return s.empty(); });
}

std::string StopStringMatcher::push(std::string_view text, bool may_stop) {
  if (stopped_) return {};
  pending_.append(text);
  if (!may_stop) unmatchable_ = pending_.size();
  size_t first_stop = std::string::npos, stop_end = 0;
  for (const auto& stop : stop_strings_) {
    // Occurrences that end past the unmatchable characters.
    const size_t from = unmatchable_ >= stop.size() ? unmatchable_ - stop.size() + 1 : 0;
    const size_t at = pending_.find(stop, from);
    if (at < first_stop) {
      first_stop = at;
      stop_end = at + stop.size();
    }
  }
  if (first_stop != std::string::npos) {
    stopped_ = true;
    std::string released = pending_.substr(0, keep_stop_ ? stop_end : first_stop);
    pending_.clear();
    return released;
  }
  // Hold back the longest suffix that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const auto& stop : stop_strings_) {
    for (size_t length = std::min(stop.size() - 1, pending_.size()); length > hold; --length) {
      if (pending_.compare(pending_.size() - length, length, stop, 0, length) == 0) {
        hold = length;
        break;
      }
    }
  }
  std::string released = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  unmatchable_ = may_stop ? 0 : pending_.size();
  return released;
}

std::string StopStringMatcher::flush() {
  if (stopped_) return {};
  return std::exchange(pending_, {});
}

}  // namespace oscar
