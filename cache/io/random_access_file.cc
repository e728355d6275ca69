#include "cache/io/random_access_file.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <limits>
#include <vector>

namespace prescient::cache::io {

Result<std::unique_ptr<PosixFile>> PosixFile::Open(const std::string& path, AccessPattern pattern) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return Status::FromErrno(errno, "open '" + path + "'");
  if (pattern == AccessPattern::kRandom) {
    (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);  // advice only: failure is harmless
  }
  return std::unique_ptr<PosixFile>(new PosixFile(fd, path, /*owned=*/true));
}

std::unique_ptr<PosixFile> PosixFile::Borrow(int fd, std::string name) {
  return std::unique_ptr<PosixFile>(new PosixFile(fd, std::move(name), /*owned=*/false));
}

PosixFile::~PosixFile() {
  // close() is not retried on EINTR: on Linux the descriptor is released anyway.
  if (owned_ && fd_ >= 0) ::close(fd_);
}

Status PosixFile::ReadExact(std::uint64_t offset, std::span<std::byte> out) const {
  std::size_t done = 0;
  while (done < out.size()) {
    const std::uint64_t position = offset + done;
    if (position > static_cast<std::uint64_t>(std::numeric_limits<off_t>::max())) {
      return Status::IoError("'" + name_ + "': offset " + std::to_string(position) +
                             " is beyond what off_t can address");
    }
    const ssize_t n =
        ::pread(fd_, out.data() + done, out.size() - done, static_cast<off_t>(position));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno, "pread '" + name_ + "' " + std::to_string(out.size()) +
                                          " bytes at offset " + std::to_string(offset));
    }
    if (n == 0) {
      return Status::IoError("'" + name_ + "': file ends at " + std::to_string(position) +
                             " while reading " + std::to_string(out.size()) + " bytes at offset " +
                             std::to_string(offset));
    }
    done += static_cast<std::size_t>(n);
  }
  return Status();
}

Status RandomAccessSource::ReadScattered(std::uint64_t offset,
                                         std::span<const ScatterPiece> pieces) const {
  for (const ScatterPiece& piece : pieces) {
    if (piece.data != nullptr) {
      PRESCIENT_RETURN_IF_ERROR(ReadExact(offset, {piece.data, piece.size}));
    }
    offset += piece.size;
  }
  return Status();
}

Status PosixFile::ReadScattered(std::uint64_t offset, std::span<const ScatterPiece> pieces) const {
  constexpr std::size_t kDiscardBytes = 256 * 1024;
  thread_local std::vector<std::byte> discard(kDiscardBytes);
  // Skipped pieces before the first wanted one and after the last are not
  // read: the kernel is asked to bring the whole range into the page cache
  // (one request to the device, as one read of it would be), and only from
  // the first wanted byte to the last is read.
  std::size_t wanted_begin = 0;
  while (wanted_begin < pieces.size() && pieces[wanted_begin].data == nullptr) ++wanted_begin;
  std::size_t wanted_end = pieces.size();
  while (wanted_end > wanted_begin && pieces[wanted_end - 1].data == nullptr) --wanted_end;
  if (wanted_begin > 0 || wanted_end < pieces.size()) {
    std::uint64_t span = 0;
    for (const ScatterPiece& piece : pieces) span += piece.size;
    // Advice only: a failure (or a range past the end) costs nothing but the warming.
    (void)::posix_fadvise(fd_, static_cast<off_t>(offset), static_cast<off_t>(span),
                          POSIX_FADV_WILLNEED);
    for (std::size_t i = 0; i < wanted_begin; ++i) offset += pieces[i].size;
    pieces = pieces.subspan(wanted_begin, wanted_end - wanted_begin);
  }
  // Expand skipped pieces into iovecs over the discard buffer (its contents never matter).
  std::vector<iovec> iov;
  std::uint64_t total = 0;
  for (const ScatterPiece& piece : pieces) {
    total += piece.size;
    if (piece.data != nullptr) {
      if (piece.size > 0) iov.push_back({piece.data, piece.size});
      continue;
    }
    for (std::size_t left = piece.size; left > 0;) {
      const std::size_t n = std::min(left, kDiscardBytes);
      iov.push_back({discard.data(), n});
      left -= n;
    }
  }
  std::size_t first = 0;  // iovecs before this one are complete
  std::uint64_t done = 0;
  while (first < iov.size()) {
    const int count = static_cast<int>(std::min<std::size_t>(iov.size() - first, IOV_MAX));
    const ssize_t n = ::preadv(fd_, iov.data() + first, count, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno, "preadv '" + name_ + "' " + std::to_string(total) +
                                          " bytes at offset " + std::to_string(offset));
    }
    if (n == 0) {
      return Status::IoError("'" + name_ + "': file ends at " + std::to_string(offset + done) +
                             " while reading " + std::to_string(total) + " bytes at offset " +
                             std::to_string(offset));
    }
    done += static_cast<std::uint64_t>(n);
    // Drop the iovecs the read filled; trim a partially filled one.
    for (std::size_t left = static_cast<std::size_t>(n); left > 0;) {
      if (left >= iov[first].iov_len) {
        left -= iov[first].iov_len;
        ++first;
      } else {
        iov[first].iov_base = static_cast<std::byte*>(iov[first].iov_base) + left;
        iov[first].iov_len -= left;
        left = 0;
      }
    }
  }
  return Status();
}

Result<std::uint64_t> PosixFile::Size() const {
  struct stat st;
  if (::fstat(fd_, &st) != 0) return Status::FromErrno(errno, "fstat '" + name_ + "'");
  return static_cast<std::uint64_t>(st.st_size);
}

Status DropFromPageCache(int fd) {
  // Dirty pages cannot be dropped; a freshly written benchmark file has many.
  if (::fdatasync(fd) != 0 && errno != EINVAL) return Status::FromErrno(errno, "fdatasync");
  const int err = ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);  // returns the error
  if (err != 0) return Status::FromErrno(err, "posix_fadvise(POSIX_FADV_DONTNEED)");
  return Status();
}

Status DropFromPageCache(const std::string& path) {
  auto file = PosixFile::Open(path);
  if (!file.ok()) return file.status();
  Status status = DropFromPageCache((*file)->fd());
  if (!status.ok()) return Status::IoError("'" + path + "': " + status.message());
  return status;
}

}  // namespace prescient::cache::io
