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

#include "cache/core/segment_tables.h"

namespace prescient::cache::detail {
namespace {

std::string ErrnoText(int err) { return std::strerror(err); }

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

}  // namespace

OpenOutcome OpenSegment(const std::string& path, MappedSegment* out, std::string* error) {
  const int fd = open(path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return OpenOutcome::kNotFound;
    *error = "cannot open cache segment " + path + ": " + ErrnoText(errno);
    return OpenOutcome::kFailed;
  }
  struct stat st{};
  auto fail = [&](std::string why) {
    close(fd);
    *error = "cache segment " + path + ": " + why;
    return OpenOutcome::kFailed;
  };
  if (fstat(fd, &st) != 0) return fail(ErrnoText(errno));
  if (st.st_uid != geteuid()) return fail("owned by another user; refusing to use it");
  if ((st.st_mode & 077) != 0) return fail("accessible to other users (mode not 0600); refusing");
  if (static_cast<std::uint64_t>(st.st_size) < sizeof(SegmentHeader)) {
    return fail("truncated (" + std::to_string(st.st_size) + " bytes); delete it");
  }
  const auto size = static_cast<std::uint64_t>(st.st_size);
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) return fail("mmap: " + ErrnoText(errno));
  const auto* h = static_cast<const SegmentHeader*>(base);
  std::string bad;
  if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != kMagic) {
    bad = "not a Prescient cache segment (bad magic); delete it";
  } else if (h->version != kLayoutVersion) {
    bad = "layout version " + std::to_string(h->version) + " but this build uses " +
          std::to_string(kLayoutVersion) + " (another Prescient version is using it?)";
  } else if (h->segment_bytes != size) {
    bad = "size " + std::to_string(size) + " does not match its header; delete it";
  }
  if (!bad.empty()) {
    munmap(base, size);
    return fail(bad);
  }
  *out = MappedSegment{fd, base, size, st.st_dev, st.st_ino};
  return OpenOutcome::kOpened;
}

CreateOutcome CreateSegment(const std::string& path, const LayoutPlan& plan, bool keep_after_exit,
                            const ProcessIdentity& self, MappedSegment* out, std::string* error) {
  SweepAbandonedTemporaries(path);
  const std::string temp = path + ".init." + std::to_string(self.pid);
  unlink(temp.c_str());  // our own leftover from an earlier failed attempt
  const int fd = open(temp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    *error = "cannot create cache segment " + temp + ": " + ErrnoText(errno);
    return CreateOutcome::kFailed;
  }
  void* base = MAP_FAILED;
  auto fail = [&](std::string why) {
    if (base != MAP_FAILED) munmap(base, plan.segment_bytes);
    close(fd);
    unlink(temp.c_str());
    *error = why;
    return CreateOutcome::kFailed;
  };
  if (fchmod(fd, 0600) != 0) return fail("cannot chmod cache segment: " + ErrnoText(errno));
  // Reserve every page now: on tmpfs, ftruncate alone succeeds and a full
  // filesystem shows up later as SIGBUS on first touch.
  const int rc = posix_fallocate(fd, 0, static_cast<off_t>(plan.segment_bytes));
  if (rc != 0) {
    return fail("cannot reserve " + std::to_string(plan.segment_bytes >> 20) +
                " MiB for the cache segment " + path + ": " + ErrnoText(rc) + FreeSpaceNote(path) +
                "; lower the cache size");
  }
  base = mmap(nullptr, plan.segment_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) return fail("cannot map the cache segment: " + ErrnoText(errno));
  if (int init = InitializeSegment(base, plan, keep_after_exit); init != 0) {
    return fail("cannot initialise the segment mutex: " + ErrnoText(init));
  }
  SegmentTables tables(base);
  if (!tables.Attach(self).ok()) return fail("cannot attach to a fresh segment");
  if (link(temp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    if (err == EEXIST) {
      fail("");
      return CreateOutcome::kExists;
    }
    return fail("cannot publish cache segment " + path + ": " + ErrnoText(err));
  }
  unlink(temp.c_str());
  struct stat st{};
  fstat(fd, &st);
  *out = MappedSegment{fd, base, plan.segment_bytes, st.st_dev, st.st_ino};
  return CreateOutcome::kCreated;
}

void UnlinkIfSame(const std::string& path, const MappedSegment& segment) {
  struct stat st{};
  if (stat(path.c_str(), &st) == 0 && st.st_dev == segment.device && st.st_ino == segment.inode) {
    unlink(path.c_str());
  }
}

void UnmapSegment(MappedSegment* segment) {
  if (segment->base != nullptr) munmap(segment->base, segment->size);
  if (segment->fd >= 0) close(segment->fd);
  *segment = MappedSegment{};
}

}  // namespace prescient::cache::detail
