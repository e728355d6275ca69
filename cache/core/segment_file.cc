#include "cache/core/segment_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <boost/interprocess/file_mapping.hpp>
#include <cerrno>
#include <climits>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace prescient::cache::detail {
namespace {

namespace bip = boost::interprocess;

std::string FreeSpaceNote(const SegmentPlace& place) {
  struct statvfs fs{};
  if (fstatvfs(place.dir.get(), &fs) != 0) return "";
  const std::uint64_t free_bytes = static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize;
  return " (" + std::to_string(free_bytes >> 20) + " MiB free in " + place.dir_path + ")";
}

// Maps the file open at `fd` (whole, read-write). Boost maps by path, so it
// reopens /proc/self/fd/<fd> and closes that second descriptor at once.
Status MapFd(const UniqueFd& fd, std::uint64_t size, const std::string& what,
             bip::mapped_region* out) {
  try {
    bip::file_mapping file(("/proc/self/fd/" + std::to_string(fd.get())).c_str(), bip::read_write);
    *out = bip::mapped_region(file, bip::read_write, 0, static_cast<std::size_t>(size));
    return Status::Ok();
  } catch (const bip::interprocess_exception& e) {
    return Status::FromErrno(e.get_native_error(), "cannot map cache segment " + what);
  }
}

// An unnamed file in `place`: O_TMPFILE, else a random name removed at once.
UniqueFd CreateUnnamed(const SegmentPlace& place, int* err) {
  int fd = openat(place.dir.get(), ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0) return UniqueFd(fd);
  if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL) {
    *err = errno;
    return UniqueFd();
  }
  std::random_device random;
  for (int attempt = 0; attempt < 16; ++attempt) {
    const std::string name = place.base + ".tmp." + std::to_string(random());
    fd = openat(place.dir.get(), name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                0600);
    if (fd >= 0) {
      unlinkat(place.dir.get(), name.c_str(), 0);
      return UniqueFd(fd);
    }
    if (errno != EEXIST) break;
  }
  *err = errno;
  return UniqueFd();
}

}  // namespace

void UniqueFd::Reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

MapOutcome MapSegment(UniqueFd fd, const std::string& what, MappedSegment* out, Status* error) {
  struct stat st{};
  if (fstat(fd.get(), &st) != 0) {
    *error = Status::FromErrno(errno, "cannot stat cache segment " + what);
    return MapOutcome::kFailed;
  }
  auto refuse = [&](const std::string& why) {
    *error = Status::InvalidArgument("cache segment " + what + ": " + why);
    return MapOutcome::kFailed;
  };
  if (!S_ISREG(st.st_mode)) return refuse("not a regular file; refusing to use it");
  if (st.st_uid != geteuid()) return refuse("owned by another user; refusing to use it");
  if ((st.st_mode & 077) != 0) return refuse("accessible to other users (mode not 0600); refusing");
  auto corrupt = [&](const std::string& why) {
    *error = Status::Corruption("cache segment " + what + " " + why + "; replaced it");
    return MapOutcome::kCorrupt;
  };
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size < sizeof(SegmentHeader)) {
    return corrupt("was truncated (" + std::to_string(size) + " bytes)");
  }
  MappedSegment mapped;
  if (Status s = MapFd(fd, size, what, &mapped.region); !s.ok()) {
    *error = s;
    return MapOutcome::kFailed;
  }
  const auto* h = static_cast<const SegmentHeader*>(mapped.base());
  if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != kMagic) {
    return corrupt("was not a Prescient cache segment (bad magic)");
  }
  if (h->version != kLayoutVersion) {  // the version is in the name: this is corruption
    return corrupt("had layout version " + std::to_string(h->version) + " under a name for " +
                   std::to_string(kLayoutVersion));
  }
  Result<LayoutPlan> geometry = CheckedGeometry(*h, size);
  if (!geometry.ok()) return corrupt("was corrupt (" + geometry.status().message() + ")");
  mapped.geometry = geometry.value();
  mapped.device = st.st_dev;
  mapped.inode = st.st_ino;
  mapped.fd = std::move(fd);
  *out = std::move(mapped);
  return MapOutcome::kMapped;
}

Status CreateSegment(const SegmentPlace& place, const LayoutPlan& plan, const ProcessIdentity& self,
                     std::uint32_t attach_flags, MappedSegment* out) {
  int err = 0;
  UniqueFd fd = CreateUnnamed(place, &err);
  if (!fd.valid()) {
    return Status::FromErrno(err, "cannot create a cache segment in " + place.dir_path);
  }
  struct stat st{};
  if (fchmod(fd.get(), 0600) != 0 || fstat(fd.get(), &st) != 0 ||
      ftruncate(fd.get(), static_cast<off_t>(plan.segment_bytes)) != 0) {
    return Status::FromErrno(errno, "cannot set up a cache segment in " + place.dir_path);
  }
  // The file is sparse: only the metadata is backed now (on tmpfs an unbacked
  // page touched on a full filesystem is a SIGBUS, so it is reserved first);
  // the data area is backed extent by extent as blocks are handed out.
  if (const int rc = posix_fallocate(fd.get(), 0, static_cast<off_t>(plan.off_data)); rc != 0) {
    const Status reserve =
        Status::FromErrno(rc, "cannot reserve " + std::to_string(plan.off_data >> 20) +
                                  " MiB of metadata for the cache segment in " + place.dir_path);
    return Status::ResourceExhausted(reserve.message() + FreeSpaceNote(place) +
                                     "; lower the cache size");
  }
  MappedSegment mapped;
  if (Status s = MapFd(fd, plan.segment_bytes, place.dir_path, &mapped.region); !s.ok()) return s;
  InitializeSegment(mapped.base(), plan, /*keep_after_exit=*/false);
  SegmentTables tables(mapped.base());
  tables.AssumeExclusive();  // not yet visible to any other process
  if (!tables.Attach(self, attach_flags).ok())
    return Status::Internal("cannot attach to a fresh segment");
  mapped.geometry = plan;
  mapped.device = st.st_dev;
  mapped.inode = st.st_ino;
  mapped.fd = std::move(fd);
  *out = std::move(mapped);
  return Status::Ok();
}

bool NameSegment(const SegmentPlace& place, const MappedSegment& segment, const char* suffix) {
  // linkat of an O_TMPFILE file through /proc (AT_EMPTY_PATH would need
  // CAP_DAC_READ_SEARCH); fails with EEXIST rather than replacing a name.
  return linkat(AT_FDCWD, segment.ProcPath().c_str(), place.dir.get(), place.Name(suffix).c_str(),
                AT_SYMLINK_FOLLOW) == 0;
}

void UnnameSegment(const SegmentPlace& place, const MappedSegment& segment, const char* suffix) {
  struct stat st{};
  const std::string name = place.Name(suffix);
  if (fstatat(place.dir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
      st.st_dev == segment.device && st.st_ino == segment.inode) {
    unlinkat(place.dir.get(), name.c_str(), 0);
  }
}

UniqueFd OpenNamed(const SegmentPlace& place, const char* suffix, Status* error,
                   std::vector<std::string>* notices) {
  const std::string name = place.Name(suffix);
  struct stat st{};
  if (fstatat(place.dir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno != ENOENT) *error = Status::FromErrno(errno, "cannot open " + place.Path(suffix));
    return UniqueFd();
  }
  if (S_ISLNK(st.st_mode) || S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)) {
    notices->push_back(place.Path(suffix) + " was a " +
                       (S_ISLNK(st.st_mode) ? "symbolic link" : "FIFO or socket") +
                       ", not a cache segment; removed it");
    unlinkat(place.dir.get(), name.c_str(), 0);
    return UniqueFd();
  }
  const int fd =
      openat(place.dir.get(), name.c_str(), O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0 && errno != ENOENT) {
    *error = Status::FromErrno(errno, "cannot open " + place.Path(suffix));
  }
  return UniqueFd(fd);
}

FileBacking::FileBacking(const MappedSegment& segment)
    : fd_(segment.fd.get()),
      base_(static_cast<unsigned char*>(segment.base())),
      size_(segment.size()) {
  struct stat st{};
  if (fd_ >= 0 && fstat(fd_, &st) == 0) {
    dev_ = static_cast<std::uint64_t>(st.st_dev);
    ino_ = static_cast<std::uint64_t>(st.st_ino);
  }
}

bool FileBacking::WriteThrough(std::uint64_t offset,
                               std::span<const struct iovec> pieces) const noexcept {
  std::uint64_t length = 0;
  for (const struct iovec& piece : pieces) length += piece.iov_len;
  if (ino_ == 0 || offset > size_ || length > size_ - offset) return false;
  // Once per call, not per piece: the descriptor must still name the mapped file.
  struct stat st{};
  if (fstat(fd_, &st) != 0 || static_cast<std::uint64_t>(st.st_dev) != dev_ ||
      static_cast<std::uint64_t>(st.st_ino) != ino_) {
    return false;
  }
  // pwritev takes at most IOV_MAX pieces, and may write less than asked.
  thread_local std::vector<struct iovec> rest;
  rest.assign(pieces.begin(), pieces.end());
  std::size_t first = 0;
  while (first < rest.size()) {
    const int count = static_cast<int>(std::min<std::size_t>(rest.size() - first, IOV_MAX));
    const ssize_t n = pwritev(fd_, rest.data() + first, count, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    // An error part way (the filesystem full, which backed blocks should not
    // see): the mapping copy rewrites the whole run.
    if (n <= 0) return false;
    offset += static_cast<std::uint64_t>(n);
    for (auto done = static_cast<std::size_t>(n); done > 0;) {
      struct iovec& piece = rest[first];
      const std::size_t step = std::min(done, piece.iov_len);
      piece.iov_base = static_cast<char*>(piece.iov_base) + step;
      piece.iov_len -= step;
      done -= step;
      if (piece.iov_len == 0) ++first;
    }
    while (first < rest.size() && rest[first].iov_len == 0) ++first;
  }
  return true;
}

Status FileBacking::Back(std::uint64_t offset, std::uint64_t length) const noexcept {
  if (offset > size_ || length > size_ - offset) {
    return Status::Corruption("cache: an extent to back lies outside the segment");
  }
  constexpr std::uint64_t kPage = 4096;
  const bool pages = offset % kPage == 0 && length % kPage == 0 && length > 0 &&
                     (offset + length) / kPage <= UINT32_MAX;
  if (pages) {
    const std::uint64_t memo = last_backed_.load(std::memory_order_acquire);
    const std::uint64_t first = memo >> 32, count = memo & 0xffffffffu;
    if (offset / kPage >= first && (offset + length) / kPage <= first + count) {
      return Status::Ok();
    }
  }
  const int rc = posix_fallocate(fd_, static_cast<off_t>(offset), static_cast<off_t>(length));
  // Not populated here: mapping the pages would only help this process, and
  // rows are written through the descriptor (WriteThrough) anyway.
  if (rc == 0) {
    if (pages)
      last_backed_.store(((offset / kPage) << 32) | (length / kPage), std::memory_order_release);
    return Status::Ok();
  }
  if (rc != EOPNOTSUPP && rc != EINVAL && rc != EBADF) {
    return Status::FromErrno(
        rc, "cannot back " + std::to_string(length >> 10) + " KiB of the cache segment");
  }
  // No fallocate here (or our descriptor was closed under us): fault the
  // pages in through the mapping; the kernel reports what would be a SIGBUS.
#ifdef MADV_POPULATE_WRITE
  if (madvise(base_ + offset, length, MADV_POPULATE_WRITE) == 0) return Status::Ok();
  return Status::FromErrno(
      errno == EFAULT ? ENOSPC : errno,
      "cannot back " + std::to_string(length >> 10) + " KiB of the cache segment");
#else
  return Status::ResourceExhausted("cannot back the cache segment");
#endif
}

}  // namespace prescient::cache::detail
