#include "util/progress_bar.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

namespace oscar {

ProgressBar::ProgressBar(std::string label, int64_t total, std::string unit)
    : label_(std::move(label)),
      unit_(std::move(unit)),
      total_(std::max<int64_t>(total, 1)),
      terminal_(::isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

void ProgressBar::advance(int64_t amount) {
  done_ = std::min(total_, done_ + amount);
  const auto now = std::chrono::steady_clock::now();
  const auto interval = terminal_ ? std::chrono::milliseconds(100) : std::chrono::seconds(5);
  if (now - last_draw_ >= interval) {
    last_draw_ = now;
    draw(false);
  }
}

void ProgressBar::finish() {
  if (finished_) return;
  finished_ = true;
  draw(true);
}

void ProgressBar::draw(bool final_line) {
  constexpr int kWidth = 30;
  const double fraction = double(done_) / double(total_);
  const int filled = int(fraction * kWidth);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double rate = seconds > 0 ? double(done_) / seconds : 0.0;
  const std::string bar =
      std::string(size_t(filled), '#') + std::string(size_t(kWidth - filled), '.');
  const std::string line = fmt::format("{} [{}] {}/{} {} ({:.0f} {}/s, {:.1f} s)", label_, bar,
                                       done_, total_, unit_, rate, unit_, seconds);
  if (terminal_) {
    fmt::print(stderr, "\r{}{}", line, final_line ? "\n" : "");
  } else {
    fmt::print(stderr, "{}\n", line);
  }
  std::fflush(stderr);
}

}  // namespace oscar
