#include "scheduler/tool/progress_bar.h"

#include <algorithm>
#include <cstdio>
#include <utility>

namespace prescient::scheduler::tool {

ProgressBar::ProgressBar(std::string label, bool enabled)
    : label_(std::move(label)), enabled_(enabled) {}

ProgressBar::~ProgressBar() {
  if (drawn_) {
    Draw(fraction_);
    std::fputc('\n', stderr);
  }
}

void ProgressBar::Update(double fraction) {
  if (!enabled_) return;
  fraction_ = std::clamp(fraction, 0.0, 1.0);
  const Clock::time_point now = Clock::now();
  if (now - start_ < std::chrono::seconds(1)) return;
  if (drawn_ && now - last_draw_ < std::chrono::milliseconds(100) && fraction_ < 1.0) return;
  Draw(fraction_);
}

void ProgressBar::Draw(double fraction) {
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(fraction * kWidth);
  const double seconds = std::chrono::duration<double>(Clock::now() - start_).count();
  char bar[kWidth + 1];
  for (int i = 0; i < kWidth; ++i) bar[i] = i < filled ? '#' : '.';
  bar[kWidth] = '\0';
  std::fprintf(stderr, "\r%s [%s] %3d%% %6.1fs", label_.c_str(), bar,
               static_cast<int>(fraction * 100), seconds);
  std::fflush(stderr);
  drawn_ = true;
  last_draw_ = Clock::now();
}

}  // namespace prescient::scheduler::tool
