#include "scheduler/core/read_only_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "scheduler/core/schedule_file.h"

namespace prescient::scheduler {

ReadOnlyFile ReadOnlyFile::Open(const std::string& path, const char* what) {
  auto fail = [&](const std::string& why) {
    throw ScheduleFileError(ScheduleFileErrorCode::kIo,
                            std::string(what) + " '" + path + "': " + why);
  };
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) fail(std::string("cannot open: ") + std::strerror(errno));
  struct stat st{};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail(std::string("cannot stat: ") + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(S_ISFIFO(st.st_mode)  ? "not a regular file (a FIFO)"
         : S_ISDIR(st.st_mode) ? "not a regular file (a directory)"
                               : "not a regular file");
  }
  return ReadOnlyFile(fd, static_cast<std::uint64_t>(st.st_size), path, what);
}

ReadOnlyFile::ReadOnlyFile(ReadOnlyFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      size_(other.size_),
      path_(std::move(other.path_)),
      what_(other.what_) {}

ReadOnlyFile& ReadOnlyFile::operator=(ReadOnlyFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    size_ = other.size_;
    path_ = std::move(other.path_);
    what_ = other.what_;
  }
  return *this;
}

ReadOnlyFile::~ReadOnlyFile() {
  if (fd_ >= 0) ::close(fd_);
}

std::size_t ReadOnlyFile::ReadAt(std::uint64_t offset, std::span<std::byte> out) const {
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t n =
        ::pread(fd_, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw ScheduleFileError(
          ScheduleFileErrorCode::kIo,
          std::string(what_) + " '" + path_ + "': read failed: " + std::strerror(errno));
    }
    if (n == 0) break;  // the end of the file (it may have shrunk since Open)
    done += static_cast<std::size_t>(n);
  }
  return done;
}

}  // namespace prescient::scheduler
