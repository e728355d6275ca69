#include "vol/runtime/live_stats_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace prescient::vol {

LiveStatsFile::~LiveStatsFile() {
  if (base_ != nullptr) ::munmap(base_, size_);
}

std::string LiveStatsFile::Open(const std::string& path, std::string text) {
  std::vector<std::size_t> offsets;
  const std::string marker = Marker();
  for (std::size_t at = text.find(marker); at != std::string::npos;
       at = text.find(marker, at + kWidth)) {
    offsets.push_back(at);
    text.replace(at, kWidth, std::string(kWidth - 1, ' ') + "0");
  }

  // What is at the path now: never write through a symbolic link (another
  // user's link in a shared directory would make this process overwrite what
  // it points to), never replace another user's file or anything but a
  // regular file.
  struct stat existing{};
  if (::lstat(path.c_str(), &existing) == 0) {
    if (S_ISLNK(existing.st_mode)) return "refusing " + path + ": it is a symbolic link";
    if (!S_ISREG(existing.st_mode)) return "refusing " + path + ": not a regular file";
    if (existing.st_uid != ::geteuid()) return "refusing " + path + ": owned by another user";
  }
  // The new file is built under a private temporary name (O_EXCL never
  // follows a link), created 0600, and renamed into place: a process still
  // mapping an older file of that name keeps its own, so nothing it maps is
  // ever truncated under it.
  const std::string temporary = path + ".tmp-" + std::to_string(::getpid());
  ::unlink(temporary.c_str());  // a leftover of this very pid, from a killed run
  const int fd = ::open(temporary.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return "cannot create " + path + ": " + std::strerror(errno);
  auto fail = [&](const std::string& what, int err) {
    ::close(fd);
    ::unlink(temporary.c_str());
    return what + " " + path + ": " + std::strerror(err);
  };
  // Blocks are reserved before the file is mapped: on a full filesystem a
  // mapping of a sparse file raises SIGBUS at the first write, while
  // posix_fallocate fails here with ENOSPC.
  if (const int err = ::posix_fallocate(fd, 0, static_cast<off_t>(text.size())); err != 0) {
    return fail("cannot make room for", err);
  }
  void* map = ::mmap(nullptr, text.size(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) return fail("cannot map", errno);
  std::memcpy(map, text.data(), text.size());
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::munmap(map, text.size());
    return fail("cannot put in place", err);
  }
  ::close(fd);
  base_ = static_cast<char*>(map);
  size_ = text.size();
  for (std::size_t offset : offsets) slots_.push_back(base_ + offset);
  return {};
}

void LiveStatsFile::Add(std::size_t index, std::uint64_t delta) {
  if (base_ == nullptr || index >= slots_.size() || delta == 0) return;
  // Decimal addition in place, from the last digit; a space is a 0 digit.
  char* slot = slots_[index];
  std::uint64_t carry = delta;
  for (std::size_t i = kWidth; i-- > 0 && carry != 0;) {
    const std::uint64_t digit = slot[i] == ' ' ? 0 : static_cast<std::uint64_t>(slot[i] - '0');
    const std::uint64_t sum = digit + carry % 10;
    carry = carry / 10 + sum / 10;
    slot[i] = static_cast<char>('0' + sum % 10);
  }
}

void LiveStatsFile::Set(std::size_t index, std::uint64_t value) {
  if (base_ == nullptr || index >= slots_.size()) return;
  char* slot = slots_[index];
  std::memset(slot, ' ', kWidth);
  std::size_t i = kWidth;
  do {
    slot[--i] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value != 0 && i > 0);
}

void LiveStatsFile::Abandon() {
  if (base_ != nullptr) ::munmap(base_, size_);
  base_ = nullptr;
  size_ = 0;
  slots_.clear();
}

}  // namespace prescient::vol
