#include "cache/core/segment_registry.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

namespace prescient::cache::detail {
namespace {

constexpr std::uint64_t kRegistryMagic = 0x3247455254535250ull;  // "PRSTREG2"

// Threads of one process: a POSIX record lock does not exclude them. Taken
// with a deadline, because a forked child may inherit it held by a thread
// that does not exist in the child. (Polled: std::timed_mutex needs
// pthread_mutex_clocklock, which ThreadSanitizer builds of libstdc++ lack.)
std::mutex& ThreadLock() {
  static std::mutex* const mutex = new std::mutex();
  return *mutex;
}

bool LockThreads(std::chrono::steady_clock::time_point deadline) {
  while (!ThreadLock().try_lock()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

// The record lock on `fd`, polled (F_SETLKW has no timeout).
bool LockFile(int fd, std::chrono::steady_clock::time_point deadline) {
  struct flock lock{};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  for (;;) {
    if (fcntl(fd, F_SETLK, &lock) == 0) return true;
    if (errno != EACCES && errno != EAGAIN && errno != EINTR) return false;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
}

}  // namespace

Result<std::unique_ptr<SegmentRegistry>> SegmentRegistry::Lock(const SegmentPlace& place,
                                                               std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::unique_ptr<SegmentRegistry> registry(new SegmentRegistry());
  registry->path_ = place.Path(kRegistrySuffix);
  if (!LockThreads(deadline)) {
    return Status::Unavailable("cache: another thread of this process is opening the cache");
  }
  registry->thread_lock_held_ = true;
  const std::string name = place.Name(kRegistrySuffix);
  for (;;) {
    const int fd = openat(place.dir.get(), name.c_str(),
                          O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
    if (fd < 0)
      return Status::FromErrno(errno, "cannot open the cache registry " + registry->path_);
    registry->file_ = UniqueFd(fd);
    struct stat st{};
    if (fstat(fd, &st) != 0) return Status::FromErrno(errno, "cannot stat " + registry->path_);
    if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
      return Status::InvalidArgument(
          "cache registry " + registry->path_ +
          " is not a regular file of this user with mode 0600; refusing");
    }
    if (!LockFile(fd, deadline)) {
      return Status::Unavailable("cache: the registry " + registry->path_ + " stayed locked for " +
                                 std::to_string(timeout.count()) + " ms");
    }
    // The last holder removes the file under the lock: whoever waited on it
    // holds a removed file now and must take the lock on the current one.
    struct stat now{};
    if (fstatat(place.dir.get(), name.c_str(), &now, AT_SYMLINK_NOFOLLOW) == 0 &&
        now.st_dev == st.st_dev && now.st_ino == st.st_ino) {
      break;
    }
  }
  registry->dir_ = place.dir.get();
  registry->name_ = name;
  const int fd = registry->file_.get();
  Contents read{};
  if (pread(fd, &read, sizeof(read), 0) == static_cast<ssize_t>(sizeof(read)) &&
      read.magic == kRegistryMagic) {
    registry->contents_ = read;
  }  // else empty (new, short or garbage)
  return registry;
}

SegmentRegistry::~SegmentRegistry() {
  file_.Reset();  // closing releases the record lock
  if (thread_lock_held_) ThreadLock().unlock();
}

UniqueFd SegmentRegistry::OpenThroughHolders() const {
  if (contents_.magic != kRegistryMagic) return UniqueFd();
  for (const Holder& h : contents_.holders) {
    if (h.pid <= 0 || h.fd < 0) continue;
    if (!IsAlive({h.pid, h.start_time})) continue;
    const std::string proc = "/proc/" + std::to_string(h.pid) + "/fd/" + std::to_string(h.fd);
    UniqueFd fd(open(proc.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC));
    struct stat st{};
    if (!fd.valid() || fstat(fd.get(), &st) != 0) continue;
    if (st.st_dev == contents_.device && st.st_ino == contents_.inode) return fd;
  }
  return UniqueFd();
}

void SegmentRegistry::Register(const MappedSegment& segment, const ProcessIdentity& self) {
  if (contents_.magic != kRegistryMagic || contents_.device != segment.device ||
      contents_.inode != segment.inode) {
    contents_ = Contents{};
    contents_.magic = kRegistryMagic;
    contents_.device = segment.device;
    contents_.inode = segment.inode;
  }
  *SlotFor(self.pid, segment.fd.get()) = Holder{self.pid, segment.fd.get(), self.start_time, 0, 0};
  Write();
}

void SegmentRegistry::RegisterKeeper(const MappedSegment& segment, const ProcessIdentity& keeper,
                                     int keeper_fd, const ProcessIdentity& anchor) {
  if (contents_.magic != kRegistryMagic || contents_.device != segment.device ||
      contents_.inode != segment.inode) {
    return;  // the caller registered the segment first; nothing to keep otherwise
  }
  *SlotFor(keeper.pid, keeper_fd) =
      Holder{keeper.pid, keeper_fd, keeper.start_time, anchor.pid, anchor.start_time};
  Write();
}

bool SegmentRegistry::HasLiveKeeperFor(const ProcessIdentity& anchor) const {
  if (contents_.magic != kRegistryMagic) return false;
  for (const Holder& h : contents_.holders) {
    if (h.pid > 0 && h.anchor_pid == anchor.pid && h.anchor_start_time == anchor.start_time &&
        IsAlive({h.pid, h.start_time})) {
      return true;
    }
  }
  return false;
}

SegmentRegistry::Holder* SegmentRegistry::SlotFor(std::int32_t pid, int fd) {
  for (Holder& h : contents_.holders) {
    if (h.pid == pid && h.fd == fd) return &h;
  }
  for (Holder& h : contents_.holders) {
    if (h.pid <= 0 || !IsAlive({h.pid, h.start_time})) return &h;
  }
  return &contents_.holders[0];
}

void SegmentRegistry::Unregister(const MappedSegment& segment, const ProcessIdentity& self) {
  if (contents_.magic != kRegistryMagic || contents_.device != segment.device ||
      contents_.inode != segment.inode) {
    return;
  }
  for (Holder& h : contents_.holders) {
    if (h.pid == self.pid && h.start_time == self.start_time && h.fd == segment.fd.get()) {
      h = Holder{0, -1, 0, 0, 0};
    }
  }
  Write();
}

bool SegmentRegistry::AnyLiveHolder() const {
  if (contents_.magic != kRegistryMagic) return false;
  for (const Holder& h : contents_.holders) {
    if (h.pid > 0 && IsAlive({h.pid, h.start_time})) return true;
  }
  return false;
}

bool SegmentRegistry::AnyOtherLiveHolderOf(const MappedSegment& segment,
                                           std::int32_t except) const {
  if (contents_.magic != kRegistryMagic || contents_.device != segment.device ||
      contents_.inode != segment.inode) {
    return false;
  }
  for (const Holder& h : contents_.holders) {
    if (h.pid > 0 && h.pid != except && IsAlive({h.pid, h.start_time})) return true;
  }
  return false;
}

void SegmentRegistry::Remove() {
  unlinkat(dir_, name_.c_str(), 0);
  const std::string base = name_.substr(0, name_.size() - std::strlen(kRegistrySuffix));
  unlinkat(dir_, (base + kMemoSuffix).c_str(), 0);
}

void SegmentRegistry::Clear() {
  contents_ = Contents{};
  Write();
}

bool SegmentRegistry::StillNames(const std::string& path, std::uint64_t device,
                                 std::uint64_t inode) {
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return errno != ENOENT;
  Contents read{};
  const bool whole = pread(fd, &read, sizeof(read), 0) == static_cast<ssize_t>(sizeof(read));
  close(fd);
  if (!whole || read.magic != kRegistryMagic) return true;
  return read.device == device && read.inode == inode;
}

void SegmentRegistry::RemoveIfAbandoned(const std::string& path, std::uint64_t device,
                                        std::uint64_t inode, const ProcessIdentity& self,
                                        std::chrono::milliseconds timeout) {
  const std::size_t slash = path.rfind('/');
  const std::size_t suffix = std::char_traits<char>::length(kRegistrySuffix);
  if (slash == std::string::npos || path.size() < slash + 1 + suffix ||
      path.compare(path.size() - suffix, suffix, kRegistrySuffix) != 0) {
    return;
  }
  SegmentPlace place;
  place.dir_path = path.substr(0, slash);
  place.base = path.substr(slash + 1, path.size() - slash - 1 - suffix);
  place.dir = UniqueFd(open(place.dir_path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!place.dir.valid()) return;
  Result<std::unique_ptr<SegmentRegistry>> registry = Lock(place, timeout);
  if (!registry.ok()) return;
  const Contents& c = registry.value()->contents_;
  if (c.magic != kRegistryMagic) {
    // Empty: the registry was removed before this call (which made the file
    // anew), or an opener that made it still waits for the lock and will make
    // another on finding this one gone. Either way nothing names a segment.
    registry.value()->Remove();
    return;
  }
  if (c.device != device || c.inode != inode) return;
  for (const Holder& h : c.holders) {
    const bool is_self = h.pid == self.pid && h.start_time == self.start_time;
    if (h.pid > 0 && !is_self && IsAlive({h.pid, h.start_time})) return;
  }
  registry.value()->Remove();
}

void SegmentRegistry::Write() {
  // One pwrite of a few KiB under the lock; a reader that finds it torn (we
  // died half-way) treats it as empty.
  (void)!pwrite(file_.get(), &contents_, sizeof(contents_), 0);
}

}  // namespace prescient::cache::detail
