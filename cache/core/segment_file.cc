#include "cache/core/segment_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "cache/core/segment_tables.h"

namespace prescient::cache::detail {
namespace {

namespace bip = boost::interprocess;

std::string FreeSpaceNote(const std::string& path) {
  const std::string dir = path.substr(0, path.rfind('/') + 1);
  struct statvfs fs{};
  if (statvfs(dir.empty() ? "." : dir.c_str(), &fs) != 0) return "";
  const std::uint64_t free_bytes = static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize;
  return " (" + std::to_string(free_bytes >> 20) + " MiB free in " + dir + ")";
}

// Deletes <path>.init.<pid> files left by creators that died before linking.
void SweepAbandonedTemporaries(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  const std::string dir = path.substr(0, slash);
  const std::string prefix = path.substr(slash + 1) + ".init.";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  while (dirent* ent = readdir(d)) {
    const std::string name = ent->d_name;
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
    const std::string full = dir + "/" + name;
    struct stat st{};
    if (pid <= 0 || stat(full.c_str(), &st) != 0 || st.st_uid != geteuid()) continue;
    // A live creator renews nothing, so judge by pid existence only: a pid
    // reused by an unrelated live process merely defers the cleanup.
    if (kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) unlink(full.c_str());
  }
  closedir(d);
}

// Maps the regular file `path` read-write through Boost.Interprocess, after
// checking that the file opened is still `expected` (a file swapped in, or a
// symbolic link planted, after the caller's checks is never mapped). `size`
// 0 maps the whole file. Sets `*not_found` if the file vanished meanwhile.
bool MapFile(const std::string& path, const struct stat& expected, std::uint64_t size,
             MappedSegment* out, Status* error, bool* not_found = nullptr) {
  try {
    bip::file_mapping file(path.c_str(), bip::read_write);
    struct stat opened{};
    if (fstat(file.get_mapping_handle().handle, &opened) != 0) {
      *error = Status::FromErrno(errno, "cannot stat cache segment " + path);
      return false;
    }
    if (opened.st_dev != expected.st_dev || opened.st_ino != expected.st_ino) {
      *error = Status::Unavailable("cache segment " + path +
                                   " was replaced while opening it; refusing it");
      return false;
    }
    bip::mapped_region region(file, bip::read_write, 0, static_cast<std::size_t>(size));
    *out = MappedSegment{std::move(region), opened.st_dev, opened.st_ino, LayoutPlan{}};
    return true;  // `file` closes its descriptor here; the mapping stays
  } catch (const bip::interprocess_exception& e) {
    if (not_found != nullptr && e.get_native_error() == ENOENT) {
      *not_found = true;
      return false;
    }
    *error = Status::FromErrno(e.get_native_error(), "cannot map cache segment " + path);
    return false;
  }
}

}  // namespace

OpenOutcome OpenSegment(const std::string& path, MappedSegment* out, Status* error) {
  struct stat st{};
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return OpenOutcome::kNotFound;
    *error = Status::FromErrno(errno, "cannot open cache segment " + path);
    return OpenOutcome::kFailed;
  }
  // Ours, but not a segment anyone can use: remove it (only this file, if it
  // is still there) so the caller makes a fresh one.
  auto corrupt = [&](const std::string& why) {
    *error = Status::Corruption("cache segment " + path + " " + why + "; replaced it");
    struct stat now{};
    if (lstat(path.c_str(), &now) == 0 && now.st_dev == st.st_dev && now.st_ino == st.st_ino) {
      unlink(path.c_str());
    }
    return OpenOutcome::kCorrupt;
  };
  auto refuse = [&](const std::string& why) {
    *error = Status::InvalidArgument("cache segment " + path + ": " + why);
    return OpenOutcome::kFailed;
  };
  if (!S_ISREG(st.st_mode)) return refuse("not a regular file; refusing to use it");
  if (st.st_uid != geteuid()) return refuse("owned by another user; refusing to use it");
  if ((st.st_mode & 077) != 0) return refuse("accessible to other users (mode not 0600); refusing");
  if (static_cast<std::uint64_t>(st.st_size) < sizeof(SegmentHeader)) {
    return corrupt("was truncated (" + std::to_string(st.st_size) + " bytes)");
  }
  const auto size = static_cast<std::uint64_t>(st.st_size);
  MappedSegment mapped;
  bool vanished = false;
  if (!MapFile(path, st, size, &mapped, error, &vanished)) {
    return vanished ? OpenOutcome::kNotFound : OpenOutcome::kFailed;
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
  *out = std::move(mapped);
  return OpenOutcome::kOpened;
}

CreateOutcome CreateSegment(const std::string& path, const LayoutPlan& plan, bool keep_after_exit,
                            const ProcessIdentity& self, MappedSegment* out, Status* error) {
  SweepAbandonedTemporaries(path);
  const std::string temp = path + ".init." + std::to_string(self.pid);
  unlink(temp.c_str());  // our own leftover from an earlier failed attempt
  const int fd = open(temp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    *error = Status::FromErrno(errno, "cannot create cache segment " + temp);
    return CreateOutcome::kFailed;
  }
  MappedSegment mapped;
  auto fail = [&](Status why) {
    mapped = MappedSegment{};
    unlink(temp.c_str());
    *error = std::move(why);
    return CreateOutcome::kFailed;
  };
  struct stat st{};
  const bool made = fchmod(fd, 0600) == 0 && fstat(fd, &st) == 0 &&
                    ftruncate(fd, static_cast<off_t>(plan.segment_bytes)) == 0;
  const int chmod_errno = errno;
  // The file is sparse: only the metadata is backed now (on tmpfs an unbacked
  // page touched on a full filesystem is a SIGBUS, so it is reserved first);
  // the data area is backed extent by extent as blocks are handed out.
  const int rc = made ? posix_fallocate(fd, 0, static_cast<off_t>(plan.off_data)) : 0;
  close(fd);
  if (!made) return fail(Status::FromErrno(chmod_errno, "cannot set up cache segment " + temp));
  if (rc != 0) {
    const Status reserve =
        Status::FromErrno(rc, "cannot reserve " + std::to_string(plan.off_data >> 20) +
                                  " MiB of metadata for the cache segment " + path);
    return fail(Status::ResourceExhausted(reserve.message() + FreeSpaceNote(path) +
                                          "; lower the cache size"));
  }
  if (Status why; !MapFile(temp, st, plan.segment_bytes, &mapped, &why)) return fail(why);
  InitializeSegment(mapped.base(), plan, keep_after_exit);
  SegmentTables tables(mapped.base());
  tables.AssumeExclusive();  // not yet visible to any other process
  if (!tables.Attach(self).ok()) return fail(Status::Internal("cannot attach to a fresh segment"));
  if (link(temp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    if (err == EEXIST) {
      fail(Status::Ok());
      return CreateOutcome::kExists;
    }
    return fail(Status::FromErrno(err, "cannot publish cache segment " + path));
  }
  unlink(temp.c_str());
  mapped.geometry = plan;
  *out = std::move(mapped);
  return CreateOutcome::kCreated;
}

Status FileBacking::Back(std::uint64_t offset, std::uint64_t length) const noexcept {
  const int fd = open(path_.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) {
    struct stat st{};
    int rc = fstat(fd, &st) != 0 ? errno : 0;
    if (rc == 0 && (st.st_dev != device_ || st.st_ino != inode_)) rc = ESTALE;
    if (rc == 0) rc = posix_fallocate(fd, static_cast<off_t>(offset), static_cast<off_t>(length));
    close(fd);
    if (rc == 0) return Status::Ok();
    if (rc != EOPNOTSUPP && rc != EINVAL && rc != ESTALE) {
      return Status::FromErrno(
          rc, "cannot back " + std::to_string(length >> 10) + " KiB of the cache segment " + path_);
    }
  }
  // No usable path (replaced, unlinked) or no fallocate: fault the pages in
  // through the mapping; the kernel reports what would have been a SIGBUS.
#ifdef MADV_POPULATE_WRITE
  if (madvise(base_ + offset, length, MADV_POPULATE_WRITE) == 0) return Status::Ok();
  return Status::FromErrno(
      errno == EFAULT ? ENOSPC : errno,
      "cannot back " + std::to_string(length >> 10) + " KiB of the cache segment " + path_);
#else
  return Status::ResourceExhausted("cannot back the cache segment " + path_);
#endif
}

void UnlinkIfSame(const std::string& path, const MappedSegment& segment) {
  struct stat st{};
  if (stat(path.c_str(), &st) == 0 && st.st_dev == segment.device && st.st_ino == segment.inode) {
    unlink(path.c_str());
  }
}

void UnmapSegment(MappedSegment* segment) { *segment = MappedSegment{}; }

}  // namespace prescient::cache::detail
