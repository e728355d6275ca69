// SegmentRegistry: the node's record of which processes hold its segment, and
// the lock that serialises opening it.
//
// The segment is an unnamed file (segment_file.h), so a process that wants to
// join reads <base>.lock: the segment's identity (device, inode) and the
// holders (pid, start time, descriptor number) that registered it. It opens
// the segment through any live holder's /proc/<pid>/fd/<n> (the same user may
// do that; the identity is checked), maps it and registers itself. A POSIX
// record lock on the file (fcntl; released by the kernel when its process
// dies) serialises every opener on the node, so processes that start together
// all find the first one's segment instead of racing to create their own;
// threads of one process are serialised by a process-local mutex too (a
// record lock is per process).
//
// A holder may be a keeper (segment_keeper.h): a small process that holds the
// segment for as long as an anchor process lives, recorded with that anchor.
//
// The file is small (64 holder records), mode 0600, never followed through a
// symbolic link; anything in it that does not check out is treated as empty.
#ifndef PRESCIENT_CACHE_CORE_SEGMENT_REGISTRY_H_
#define PRESCIENT_CACHE_CORE_SEGMENT_REGISTRY_H_

#include <chrono>
#include <cstdint>
#include <memory>

#include "cache/base/status.h"
#include "cache/core/process_identity.h"
#include "cache/core/segment_file.h"

namespace prescient::cache::detail {

class SegmentRegistry {
 public:
  // Opens (creating it 0600 if needed) and locks <base>.lock, waiting at most
  // `timeout` for other openers.
  static Result<std::unique_ptr<SegmentRegistry>> Lock(const SegmentPlace& place,
                                                       std::chrono::milliseconds timeout);
  ~SegmentRegistry();  // unlocks
  SegmentRegistry(const SegmentRegistry&) = delete;
  SegmentRegistry& operator=(const SegmentRegistry&) = delete;

  // The registered segment, opened through a live holder's descriptor; an
  // invalid descriptor when no holder is alive and reachable.
  UniqueFd OpenThroughHolders() const;

  // Records `self` (its descriptor in `segment`) as a holder of `segment`;
  // a different segment than the registered one replaces it (and its holders).
  void Register(const MappedSegment& segment, const ProcessIdentity& self);
  // Records `keeper` (holding `segment` as its descriptor `keeper_fd`) as a
  // holder that keeps the segment while `anchor` lives.
  void RegisterKeeper(const MappedSegment& segment, const ProcessIdentity& keeper, int keeper_fd,
                      const ProcessIdentity& anchor);
  // Whether a live keeper holds the registered segment for `anchor`.
  bool HasLiveKeeperFor(const ProcessIdentity& anchor) const;
  // Removes `self`'s record (if it names `segment`).
  void Unregister(const MappedSegment& segment, const ProcessIdentity& self);
  // Forgets the registered segment (it is corrupt or gone).
  void Clear();
  // Whether any registered holder is alive.
  bool AnyLiveHolder() const;
  // Whether a live process other than `except` holds `segment` (an ordinary
  // holder or a keeper); false when the registry names another segment.
  bool AnyOtherLiveHolderOf(const MappedSegment& segment, std::int32_t except) const;
  // Removes the registry file (the last holder leaving; openers that waited
  // on it notice and use a new one).
  void Remove();

  // A keeper's last act when its anchor has exited: removes the registry at
  // `path` if it still names the segment (device, inode) and no holder but
  // `self` lives. The job's processes may all have ended without closing the
  // cache (DataLoader workers end with os._exit), and nobody else would remove
  // it. Waits at most `timeout` for the lock; does nothing on any doubt.
  static void RemoveIfAbandoned(const std::string& path, std::uint64_t device, std::uint64_t inode,
                                const ProcessIdentity& self, std::chrono::milliseconds timeout);

  // Without taking the lock (a keeper polls it): whether the registry at
  // `path` still names the segment (device, inode). False only when it
  // certainly does not: the file is gone or names another segment (a torn
  // or unreadable file is "yes": the writer is still at work).
  static bool StillNames(const std::string& path, std::uint64_t device, std::uint64_t inode);

 private:
  SegmentRegistry() = default;
  void Write();

  struct Holder {
    std::int32_t pid;
    std::int32_t fd;
    std::uint64_t start_time;
    // A keeper's anchor (0 for an ordinary holder).
    std::int32_t anchor_pid;
    std::uint64_t anchor_start_time;
  };
  // `pid`'s record for descriptor `fd`, else a free or dead one, else the
  // first (full of live holders: any of them will do for the next opener).
  Holder* SlotFor(std::int32_t pid, int fd);
  static constexpr std::uint32_t kHolders = 64;
  struct Contents {
    std::uint64_t magic;
    std::uint64_t device;
    std::uint64_t inode;
    Holder holders[kHolders];
  };

  UniqueFd file_;
  std::string path_;
  int dir_ = -1;  // the place's directory (owned by the caller's SegmentPlace)
  std::string name_;
  Contents contents_{};
  bool thread_lock_held_ = false;
};

}  // namespace prescient::cache::detail

#endif  // PRESCIENT_CACHE_CORE_SEGMENT_REGISTRY_H_
