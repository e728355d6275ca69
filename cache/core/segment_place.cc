// Where a node's cache files live: a directory of this user that no other user
// can take over.
//
// The predictable name <shm_dir>/prescient-u<uid> is used when it is (or can
// be made) a directory owned by this user, mode 0700, reached without
// following a symbolic link. If another user took that name first (a file, a
// link, a FIFO, a directory of theirs: anything planted to deny us the
// cache), the files go to <shm_dir>/prescient-u<uid>-<random>: every process
// of the user scans for such directories and takes the oldest one it owns
// (mode 0700; by birth time), making one if there is none and scanning again,
// so all of them converge on the same directory whatever the others planted. Inside the
// directory nobody else can create, rename or remove anything.
#include "cache/core/segment_place.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace prescient::cache::detail {
namespace {

// Opens `name` under `parent` as a directory of ours with mode 0700 (made
// 0700 if ours and looser); an invalid descriptor and `why` when it is not.
UniqueFd OpenOwnDirectory(int parent, const std::string& name, std::string* why) {
  const int fd =
      openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    *why = errno == ELOOP     ? "is a symbolic link"
           : errno == ENOTDIR ? "is not a directory"
                              : std::string("cannot be opened: ") + std::strerror(errno);
    return UniqueFd();
  }
  UniqueFd dir(fd);
  struct stat st{};
  if (fstat(fd, &st) != 0) {
    *why = std::string("cannot be checked: ") + std::strerror(errno);
    return UniqueFd();
  }
  if (st.st_uid != geteuid()) {
    *why = "belongs to user " + std::to_string(st.st_uid);
    return UniqueFd();
  }
  if ((st.st_mode & 07777) != 0700 && fchmod(fd, 0700) != 0) {
    *why = std::string("has mode ") + std::to_string(st.st_mode & 07777) + " and cannot be fixed";
    return UniqueFd();
  }
  return dir;
}

// Our fallback directories prescient-u<uid>-<suffix> under `parent`, sorted.
std::vector<std::string> FallbackNames(int parent, const std::string& prefix) {
  std::vector<std::string> names;
  const int fd = openat(parent, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return names;
  DIR* d = fdopendir(fd);
  if (d == nullptr) {
    close(fd);
    return names;
  }
  while (const dirent* ent = readdir(d)) {
    const std::string name = ent->d_name;
    if (name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0) {
      names.push_back(name);
    }
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

// The oldest fallback directory of ours (birth time, then name), or none.
// Oldest, not smallest name: a process that found only its own directory
// keeps it, and one created later can never be older, so everyone who looks
// afterwards makes the same choice.
UniqueFd OldestOwnFallback(int parent, const std::string& prefix, std::string* chosen) {
  UniqueFd best;
  std::pair<std::uint64_t, std::string> best_key{~std::uint64_t{0}, ""};
  for (const std::string& name : FallbackNames(parent, prefix)) {
    std::string why;
    UniqueFd fd = OpenOwnDirectory(parent, name, &why);
    if (!fd.valid()) continue;
    struct statx sx{};
    std::uint64_t born = 0;  // without a birth time (old kernels): by name alone
    if (statx(fd.get(), "", AT_EMPTY_PATH, STATX_BTIME, &sx) == 0 &&
        (sx.stx_mask & STATX_BTIME) != 0) {
      born =
          static_cast<std::uint64_t>(sx.stx_btime.tv_sec) * 1'000'000'000u + sx.stx_btime.tv_nsec;
    }
    std::pair<std::uint64_t, std::string> key{born, name};
    if (!best.valid() || key < best_key) {
      best = std::move(fd);
      best_key = std::move(key);
    }
  }
  if (best.valid()) *chosen = best_key.second;
  return best;
}

}  // namespace

FilesystemKind ClassifyFilesystem(std::int64_t magic) {
  struct Known {
    std::uint32_t magic;
    FilesystemKind kind;
  };
  static constexpr Known kKnown[] = {
      {0x01021994, {FilesystemKind::kMemory, "tmpfs"}},
      {0x858458f6, {FilesystemKind::kMemory, "ramfs"}},
      {0x958458f6, {FilesystemKind::kMemory, "hugetlbfs"}},
      {0x00006969, {FilesystemKind::kNetwork, "nfs"}},
      {0x0000517b, {FilesystemKind::kNetwork, "smb"}},
      {0xff534d42, {FilesystemKind::kNetwork, "cifs"}},
      {0xfe534d42, {FilesystemKind::kNetwork, "smb2"}},
      {0x00c36400, {FilesystemKind::kNetwork, "ceph"}},
      {0x0bd00bd0, {FilesystemKind::kNetwork, "lustre"}},
      {0x47504653, {FilesystemKind::kNetwork, "gpfs"}},
      {0x19830326, {FilesystemKind::kNetwork, "beegfs"}},
      {0xaad7aaea, {FilesystemKind::kNetwork, "panfs"}},
      {0x5346414f, {FilesystemKind::kNetwork, "afs"}},
      {0x6b414653, {FilesystemKind::kNetwork, "kafs"}},
      {0x01021997, {FilesystemKind::kNetwork, "9p"}},
      {0x73757245, {FilesystemKind::kNetwork, "coda"}},
      {0x01161970, {FilesystemKind::kNetwork, "gfs2"}},
      {0x7461636f, {FilesystemKind::kNetwork, "ocfs2"}},
      {0x0000ef53, {FilesystemKind::kDisk, "ext4"}},
      {0x58465342, {FilesystemKind::kDisk, "xfs"}},
      {0x9123683e, {FilesystemKind::kDisk, "btrfs"}},
      {0xf2f52010, {FilesystemKind::kDisk, "f2fs"}},
      {0x2fc12fc1, {FilesystemKind::kDisk, "zfs"}},
      {0x794c7630, {FilesystemKind::kDisk, "overlayfs"}},
      {0x65735546, {FilesystemKind::kDisk, "fuse"}},
  };
  for (const Known& k : kKnown) {
    if (static_cast<std::uint32_t>(magic) == k.magic) return k.kind;
  }
  return {FilesystemKind::kDisk, "unknown"};
}

Result<SegmentPlace> OpenSegmentPlace(const CacheOptions& options,
                                      std::vector<std::string>* notices) {
  std::string shm = options.shm_dir.empty() ? std::string("/dev/shm") : options.shm_dir;
  while (shm.size() > 1 && shm.back() == '/') shm.pop_back();
  const int shm_fd = open(shm.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (shm_fd < 0) return Status::FromErrno(errno, "cannot open the cache directory " + shm);
  UniqueFd parent(shm_fd);
  struct statfs fs{};
  if (fstatfs(parent.get(), &fs) == 0) {
    const FilesystemKind kind = ClassifyFilesystem(static_cast<std::int64_t>(fs.f_type));
    if (kind.kind == FilesystemKind::kNetwork) {
      return Status::InvalidArgument(
          "cache directory " + shm + " is on a network filesystem (" + kind.name +
          "): it is shared with other nodes and every cached page would cross the network; use "
          "a tmpfs such as /dev/shm, or node-local storage");
    }
    if (kind.kind == FilesystemKind::kDisk) {
      notices->push_back("cache directory " + shm + " is on a disk filesystem (" + kind.name +
                         "), not in memory: cached rows are written to that disk (fine on "
                         "node-local NVMe; a tmpfs such as /dev/shm is faster)");
    }
  }

  SegmentPlace place;
  place.base = SegmentBaseName(options);
  const std::string primary = UserDirectoryName();
  mkdirat(parent.get(), primary.c_str(), 0700);  // EEXIST: whatever is there is checked next
  std::string why;
  place.dir = OpenOwnDirectory(parent.get(), primary, &why);
  if (place.dir.valid()) {
    place.dir_path = shm + "/" + primary;
    return place;
  }
  // Taken by someone else: a directory of ours with a random suffix.
  const std::string prefix = primary + "-";
  std::string chosen;
  place.dir = OldestOwnFallback(parent.get(), prefix, &chosen);
  if (!place.dir.valid()) {
    std::random_device random;
    for (int attempt = 0; attempt < 16 && !place.dir.valid(); ++attempt) {
      char suffix[17];
      std::snprintf(suffix, sizeof(suffix), "%08x%08x", random(), random());
      const std::string mine = prefix + suffix;
      if (mkdirat(parent.get(), mine.c_str(), 0700) != 0 && errno != EEXIST) {
        return Status::FromErrno(errno, "cannot make a cache directory in " + shm);
      }
      // Others may have made theirs meanwhile: all take the oldest. A
      // directory's birth time is stamped a moment before its name appears,
      // so look again until two looks 10 ms apart agree (an older one whose
      // name appeared late is found then).
      std::string previous;
      for (int look = 0; look < 10; ++look) {
        place.dir = OldestOwnFallback(parent.get(), prefix, &chosen);
        if (look > 0 && chosen == previous) break;
        previous = chosen;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      if (chosen != mine) unlinkat(parent.get(), mine.c_str(), AT_REMOVEDIR);  // if still empty
    }
    if (!place.dir.valid()) {
      return Status::Unavailable("cache: no usable per-user directory in " + shm);
    }
  }
  place.dir_path = shm + "/" + chosen;
  notices->push_back(shm + "/" + primary + " " + why +
                     " (not this user's cache directory); using " + place.dir_path + " instead");
  return place;
}

}  // namespace prescient::cache::detail
