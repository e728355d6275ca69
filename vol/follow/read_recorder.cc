#include "vol/follow/read_recorder.h"

#include <unistd.h>

#include <atomic>
#include <new>

namespace prescient::vol {
namespace {

struct Recording {
  bool active = false;
  bool overflow = false;
  std::uint64_t rows = 0;
  std::string text;
};

// A plain pointer, not a thread_local object with a destructor: the plugin
// must stay unloadable, and a thread-local destructor would pin it. One
// Recording per thread that ever records (the follower's worker threads).
thread_local Recording* t_recording = nullptr;

bool Printable(std::string_view s) {
  for (char c : s) {
    if (c == '\t' || c == '\n') return false;
  }
  return true;
}

}  // namespace

void ReadRecorder::Begin() noexcept {
  if (t_recording == nullptr) t_recording = new (std::nothrow) Recording();
  if (t_recording == nullptr) return;
  t_recording->active = true;
  t_recording->overflow = false;
  t_recording->rows = 0;
  t_recording->text.clear();
}

std::string_view ReadRecorder::End() noexcept {
  if (t_recording == nullptr) return "";
  t_recording->active = false;
  if (t_recording->overflow) return "overflow\n";
  return t_recording->text;
}

void ReadRecorder::BeginAtFirstRead(long named_pid) noexcept {
  // A forked child inherits "seen" from a parent that read; that parent had the
  // connector loaded, so the child's follower found it before its first fetch.
  static std::atomic<bool> first_read_seen{false};
  if (first_read_seen.load(std::memory_order_relaxed)) return;
  if (first_read_seen.exchange(true, std::memory_order_relaxed)) return;
  if (named_pid != 0 && named_pid == ::getpid() && !Active()) Begin();
}

bool ReadRecorder::Active() noexcept { return t_recording != nullptr && t_recording->active; }

void ReadRecorder::Note(std::string_view file, std::string_view dataset, std::uint64_t dataset_rows,
                        const RowSelection& rows) noexcept {
  Recording* r = t_recording;
  if (r == nullptr || !r->active || r->overflow) return;
  // A name the line format cannot carry is not learned from.
  if (!Printable(file) || !Printable(dataset) || r->rows + rows.rows() > kMaxRows) {
    r->overflow = true;
    return;
  }
  try {
    r->rows += rows.rows();
    std::string& out = r->text;
    out.append(file).append("\t").append(dataset).append("\t");
    out.append(std::to_string(dataset_rows)).append("\t");
    bool first = true;
    rows.ForEachRun([&](const RowRun& run) {
      if (!first) out.push_back(',');
      first = false;
      out.append(std::to_string(run.first)).append("+").append(std::to_string(run.count));
    });
    out.push_back('\n');
  } catch (...) {  // an allocation: learn nothing from this bracket
    r->overflow = true;
  }
}

}  // namespace prescient::vol
