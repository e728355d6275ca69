// Internal: a file read with pread() into memory the caller owns, never
// mapped. Schedule and next-use index files may be truncated or rewritten in
// place while a job runs (cp over them, truncate); a mapping would then fault
// (SIGBUS) on the pages past the new end, whereas a short read is an error
// the reader reports (kTruncated).
//
// Open() refuses anything but a regular file (a FIFO, a device, a directory)
// with kIo naming the path, before any read that could block: the file is
// opened with O_NONBLOCK and checked with fstat().
#ifndef PRESCIENT_SCHEDULER_CORE_READ_ONLY_FILE_H_
#define PRESCIENT_SCHEDULER_CORE_READ_ONLY_FILE_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace prescient::scheduler {

class ReadOnlyFile {
 public:
  // `what` names the kind of file in errors ("schedule file", "next-use
  // index"). Throws ScheduleFileError(kIo).
  static ReadOnlyFile Open(const std::string& path, const char* what);

  ReadOnlyFile(ReadOnlyFile&& other) noexcept;
  ReadOnlyFile& operator=(ReadOnlyFile&& other) noexcept;
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;
  ~ReadOnlyFile();

  // st_size at Open().
  std::uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Reads up to out.size() bytes at `offset`; returns how many were read
  // (fewer only at the current end of the file). Thread-safe (pread).
  // Throws ScheduleFileError(kIo) on a read error.
  std::size_t ReadAt(std::uint64_t offset, std::span<std::byte> out) const;

 private:
  ReadOnlyFile(int fd, std::uint64_t size, std::string path, const char* what)
      : fd_(fd), size_(size), path_(std::move(path)), what_(what) {}

  int fd_ = -1;
  std::uint64_t size_ = 0;
  std::string path_;
  const char* what_ = "";
};

}  // namespace prescient::scheduler

#endif  // PRESCIENT_SCHEDULER_CORE_READ_ONLY_FILE_H_
