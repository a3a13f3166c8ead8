#pragma once
// A one-line progress bar on stderr, redrawn in place when stderr is a terminal and printed at
// most every few seconds otherwise (so logs stay readable).
#include <chrono>
#include <cstdint>
#include <string>

namespace oscar {

class ProgressBar {
 public:
  ProgressBar(std::string label, int64_t total, std::string unit);
  void advance(int64_t amount);
  void finish();

 private:
  void draw(bool final_line);
  std::string label_;
  std::string unit_;
  int64_t total_;
  int64_t done_ = 0;
  bool terminal_;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace oscar
