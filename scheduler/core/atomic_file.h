// Internal: writes a file under a temporary name and renames it into place,
// so readers never see a partial file and open readers keep the file they opened.
#ifndef PRESCIENT_SCHEDULER_CORE_ATOMIC_FILE_H_
#define PRESCIENT_SCHEDULER_CORE_ATOMIC_FILE_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>

namespace prescient::scheduler {

// Writes to `path + ".tmp-<pid>"`; Commit() renames it over `path`. The
// temporary is removed if Commit() is never reached. Errors throw
// ScheduleFileError(kIo) naming `what_file` (e.g. "schedule file").
class AtomicFile {
 public:
  AtomicFile(const std::string& path, const char* what_file);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void Write(std::span<const std::byte> bytes);
  void Pad(std::uint64_t n);  // n zero bytes, n < 8
  void Commit();

 private:
  [[noreturn]] void Fail(const char* what);

  std::string path_;
  std::string tmp_;
  const char* what_file_;
  FILE* file_ = nullptr;
};

}  // namespace prescient::scheduler

#endif  // PRESCIENT_SCHEDULER_CORE_ATOMIC_FILE_H_
