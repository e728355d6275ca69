// A progress bar on stderr for work that may take more than a second.
//
// Nothing is printed until a second has passed, so quick commands stay
// quiet; after that the bar redraws at most ten times a second on one line
// (carriage return) and ends with a newline. Not thread-safe: update it from
// one thread.
//
//   ProgressBar bar("planning");
//   for (...) bar.Update(done / total);
#ifndef PRESCIENT_SCHEDULER_TOOL_PROGRESS_BAR_H_
#define PRESCIENT_SCHEDULER_TOOL_PROGRESS_BAR_H_

#include <chrono>
#include <functional>
#include <string>

namespace prescient::scheduler::tool {

class ProgressBar {
 public:
  explicit ProgressBar(std::string label, bool enabled = true);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  void Update(double fraction);  // fraction in [0, 1]; clamped
  // A callback for library functions taking std::function<void(double)>.
  std::function<void(double)> Callback() {
    return [this](double f) { Update(f); };
  }

 private:
  using Clock = std::chrono::steady_clock;
  void Draw(double fraction);

  std::string label_;
  bool enabled_;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_draw_{};
  bool drawn_ = false;
  double fraction_ = 0;
};

}  // namespace prescient::scheduler::tool

#endif  // PRESCIENT_SCHEDULER_TOOL_PROGRESS_BAR_H_
