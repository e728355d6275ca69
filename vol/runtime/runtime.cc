#include "vol/runtime/runtime.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <thread>

#include "cache/base/mutex.h"
#include "vol/runtime/process_anchor.h"
#include "vol/runtime/trace.h"

namespace prescient::vol {

Runtime& Runtime::Get() {
  // Never destroyed: HDF5 may call the connector from its own atexit handler,
  // after static destructors would have run.
  static Runtime* runtime = new Runtime();
  return *runtime;
}

Runtime::Runtime() : pid_(::getpid()), parent_pid_(::getppid()) {
  ::pthread_atfork(&Runtime::AtForkPrepare, &Runtime::AtForkParent, &Runtime::AtForkChild);
}

// Both locks are leaves (no other lock is taken under them), so taking them
// before fork() cannot deadlock, and the child inherits them consistent.
void Runtime::AtForkPrepare() {
  Runtime& r = Get();
  r.mutex_.Lock();
  r.stats_.LockForFork();
}

void Runtime::AtForkParent() {
  Runtime& r = Get();
  r.stats_.UnlockInParent();
  r.mutex_.Unlock();
}

void Runtime::AtForkChild() {
  Runtime& r = Get();
  r.pid_ = ::getpid();
  r.parent_pid_ = ::getppid();
  r.forked_child_ = true;
  r.stats_.ResetInChild();
  // The child opens its own statistics file on its first count.
  new (&r.stats_file_once_) std::once_flag();
  r.stats_file_checked_.store(false, std::memory_order_release);
  r.mutex_.Unlock();
}

long Runtime::rank_owner_pid() const {
  const long anchor = SegmentAnchor().pid;
  if (anchor != pid_) return anchor;
  return forked_child_ ? parent_pid_ : pid_;
}

void Runtime::RecordInfoSettings(std::string_view settings) {
  cache::MutexLock lock(&mutex_);
  if (info_settings_.empty()) info_settings_ = std::string(settings);
}

const Options& Runtime::ParseOptionsOnce() {
  std::call_once(parse_once_, [this] {
    std::string settings;
    {
      cache::MutexLock lock(&mutex_);
      settings = info_settings_;
    }
    ParsedOptions parsed = ParseOptions(&ProcessEnv, settings);
    options_ = parsed.options;
    g_trace_callbacks.store(options_.log_level == LogLevel::kDebug, std::memory_order_relaxed);
    for (const std::string& warning : parsed.warnings) {
      Log(LogLevel::kWarn, warning + "; Prescient continues as a pure pass-through");
    }
    options_parsed_.store(true, std::memory_order_release);
  });
  return options_;
}

void Runtime::Log(LogLevel level, std::string_view message) {
  // Before options are parsed (or while parsing), warnings and errors print.
  const LogLevel threshold = options_.log_level;
  if (level > threshold) return;
  static constexpr const char* kNames[] = {"error", "warning", "info", "debug"};
  // One write(2) of the whole line: the ranks and DataLoader workers of a
  // node share the job's stderr, and stdio may split a line into several
  // writes that another process's line then lands between.
  std::string line;
  try {
    line = std::string("prescient: ") + kNames[static_cast<int>(level)] + ": ";
    line += message;
    line += '\n';
  } catch (...) {  // no memory for the line: stdio's way, which needs none
    std::fprintf(stderr, "prescient: %s: %.*s\n", kNames[static_cast<int>(level)],
                 static_cast<int>(message.size()), message.data());
    return;
  }
  std::string_view rest = line;
  while (!rest.empty()) {
    const ssize_t written = ::write(STDERR_FILENO, rest.data(), rest.size());
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return;
    rest.remove_prefix(static_cast<std::size_t>(written));
  }
}

namespace {

// What a statistics file says of its writer (zeros: no file, not ours, unreadable).
struct RecordedWriter {
  long pid = 0;
  long parent_pid = 0;
};

long NumberAfter(std::string_view text, std::string_view key) {
  const std::size_t at = text.find(key);
  if (at == std::string_view::npos) return 0;
  return std::strtol(std::string(text.substr(at + key.size(), 24)).c_str(), nullptr, 10);
}

RecordedWriter WriterRecordedIn(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return {};
  char head[256] = {};
  const std::size_t n = std::fread(head, 1, sizeof(head) - 1, f);
  std::fclose(f);
  const std::string_view text(head, n);
  return {NumberAfter(text, "\"pid\": "), NumberAfter(text, "\"parent_pid\": ")};
}

// When this process started, in seconds since the epoch (0 if unknown):
// /proc/self/stat's start time (clock ticks after boot) plus /proc/stat's btime.
std::int64_t ProcessStartSeconds() {
  long long boot = 0;
  if (std::FILE* f = std::fopen("/proc/stat", "r")) {
    char line[256];
    while (std::fgets(line, sizeof(line), f) != nullptr) {
      if (std::sscanf(line, "btime %lld", &boot) == 1) break;
    }
    std::fclose(f);
  }
  unsigned long long ticks = 0;
  if (std::FILE* f = std::fopen("/proc/self/stat", "r")) {
    char buf[1024] = {};
    (void)std::fread(buf, 1, sizeof(buf) - 1, f);
    std::fclose(f);
    // Field 22; fields after the command name (which may hold spaces) start past its ')'.
    const char* p = std::strrchr(buf, ')');
    for (int field = 2; p != nullptr && field < 22; ++field) p = std::strchr(p + 1, ' ');
    if (p != nullptr) ticks = std::strtoull(p + 1, nullptr, 10);
  }
  const long hz = ::sysconf(_SC_CLK_TCK);
  if (boot == 0 || ticks == 0 || hz <= 0) return 0;
  return boot + static_cast<std::int64_t>(ticks / static_cast<unsigned long long>(hz));
}

// True when the file at `path` was last changed after this process started:
// another process of this job wrote it (a DataLoader worker before the training
// process, which counted nothing until it exited).
bool WrittenSinceThisProcessStarted(const std::string& path) {
  struct stat st{};
  const std::int64_t started = ProcessStartSeconds();
  return started > 0 && ::stat(path.c_str(), &st) == 0 && st.st_ctim.tv_sec >= started;
}

bool Alive(long pid) {
  return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM);
}

// Holds flock(2) on a directory while processes of a job pick their statistics
// files in it: choosing a path (seeing whether another live process writes
// it) and creating the file must be one step, or siblings that start together
// (DataLoader workers that each load the connector) all take the plain path
// and all but one lose their counters. Best effort and bounded: without the
// lock (an unreadable directory, a filesystem without flock, a holder stopped
// by SIGSTOP or a child forked while it was held) the file is made anyway.
class StatsDirectoryTurn {
 public:
  explicit StatsDirectoryTurn(const std::string& file) {
    const std::size_t slash = file.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : file.substr(0, slash + 1);
    fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd_ < 0) return;
    const auto give_up = std::chrono::steady_clock::now() + kWait;
    while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      if ((errno != EWOULDBLOCK && errno != EINTR) || std::chrono::steady_clock::now() >= give_up) {
        ::close(fd_);
        fd_ = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  ~StatsDirectoryTurn() {
    if (fd_ >= 0) ::close(fd_);  // releases the lock
  }
  StatsDirectoryTurn(const StatsDirectoryTurn&) = delete;
  StatsDirectoryTurn& operator=(const StatsDirectoryTurn&) = delete;

 private:
  // Creating a statistics file takes well under a millisecond.
  static constexpr std::chrono::milliseconds kWait{500};
  int fd_ = -1;
};

}  // namespace

std::string Runtime::StatsPathForThisProcess() {
  std::string path = options().stats_path;
  const std::string pid = std::to_string(pid_);
  bool has_pid = false;
  for (std::size_t at = path.find("%p"); at != std::string::npos; at = path.find("%p")) {
    path.replace(at, 2, pid);
    has_pid = true;
  }
  // A forked worker, or any process whose path another process of this job
  // writes or wrote, gets its own file; a file left by an earlier job is
  // replaced. "Of this job": its writer or the writer's parent is alive (a
  // worker's siblings, also workers started by a forkserver), or it was written
  // after this process started (the training process, which may make its
  // Runtime only after its workers when they alone open files). A process
  // working for another anchor (a DataLoader worker) always gets its own.
  const bool works_for_another = ProcessAnchor().pid != pid_;
  const RecordedWriter writer = has_pid ? RecordedWriter{} : WriterRecordedIn(path);
  const bool others =
      writer.pid != 0 && writer.pid != pid_ &&
      (Alive(writer.pid) || Alive(writer.parent_pid) || WrittenSinceThisProcessStarted(path));
  if (!has_pid && (forked_child_ || works_for_another || others)) {
    const std::size_t dot = path.rfind('.');
    const std::size_t slash = path.rfind('/');
    const bool has_ext = dot != std::string::npos && (slash == std::string::npos || dot > slash);
    path = has_ext ? path.substr(0, dot) + "." + pid + path.substr(dot) : path + "." + pid;
  }
  return path;
}

void Runtime::StartStatsFile() {
  std::call_once(stats_file_once_, [this] {
    if (!options().stats_path.empty()) {
      const StatsDirectoryTurn turn(options().stats_path);
      const std::string error =
          stats_.StartFile(StatsPathForThisProcess(), {.pid = pid_,
                                                       .parent_pid = parent_pid_,
                                                       .forked_child = forked_child_,
                                                       .enabled = options_.enable});
      if (!error.empty()) Log(LogLevel::kWarn, "PRESCIENT_STATS: " + error);
    }
    stats_file_checked_.store(true, std::memory_order_release);
  });
}

void Runtime::Fallback(Counter counter, std::string_view message, std::uint64_t count) {
  stats().Add(counter, count);
  if (!fallback_warned_[static_cast<std::size_t>(counter)].exchange(true)) {
    Log(LogLevel::kWarn, message);
  }
}

}  // namespace prescient::vol
