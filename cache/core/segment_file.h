// The segment file: creating, checking and mapping it, and naming it.
//
// A node's segment is an unnamed file (O_TMPFILE) in its directory: no name
// in the filesystem refers to it, so the kernel frees its memory the moment
// the last process holding it (a descriptor or a mapping) is gone, however it
// ended (SIGKILL, the OOM killer, os._exit in a DataLoader worker). Processes
// find it through the node's registry (segment_registry.h), which records who
// holds it; they open it through a live holder's /proc/<pid>/fd/<n> and keep
// their own descriptor for as long as they use it. A segment kept for the
// next job (keep_after_exit) is also linked under <base>.kept.
//
// The mapping itself is a Boost.Interprocess file_mapping + mapped_region
// (RAII: the region unmaps itself). Nothing else of Boost.Interprocess is
// used: its mutexes and managed segments do not survive a holder's death
// (see cache/README.md), so the segment's contents are plain arrays guarded
// by one lock that survives its holder's death (shm_sync.h).
#ifndef PRESCIENT_CACHE_CORE_SEGMENT_FILE_H_
#define PRESCIENT_CACHE_CORE_SEGMENT_FILE_H_

#include <sys/types.h>

#include <atomic>
#include <boost/interprocess/mapped_region.hpp>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "cache/base/status.h"
#include "cache/core/process_identity.h"
#include "cache/core/segment_layout.h"
#include "cache/core/segment_tables.h"

namespace prescient::cache::detail {

// An owned file descriptor (closed when destroyed).
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) Reset(std::exchange(other.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { Reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void Reset(int fd = -1);

 private:
  int fd_ = -1;
};

// Where a node's files live: a directory held open (files are reached with
// *at() calls, so the directory cannot be swapped under us) and the base name
// of its files: <base>.lock (the registry) and <base>.kept (a kept segment).
struct SegmentPlace {
  UniqueFd dir;
  std::string dir_path;
  std::string base;

  std::string Name(const char* suffix) const { return base + suffix; }
  std::string Path(const char* suffix) const { return dir_path + "/" + Name(suffix); }
};

inline constexpr const char* kRegistrySuffix = ".lock";
inline constexpr const char* kKeptSuffix = ".kept";
// A file the segment's users keep beside it (the connector's memo of the
// datasets its prefetch leaders resolved, vol/schedule/resolution_memo.h):
// nothing in it depends on the segment, and it is removed with the registry.
inline constexpr const char* kMemoSuffix = ".resolved";

// A mapped segment and the descriptor that holds it; move-only.
struct MappedSegment {
  boost::interprocess::mapped_region region;
  UniqueFd fd;       // O_CLOEXEC: inherited by forked workers, not by exec'd programs
  dev_t device = 0;  // the file's identity
  ino_t inode = 0;
  // The geometry checked when the segment was mapped (CheckedGeometry) or
  // planned when it was created: the only copy the process trusts.
  LayoutPlan geometry;

  void* base() const { return region.get_address(); }
  std::uint64_t size() const { return region.get_size(); }
  // A path that opens this segment from this process and its forked
  // children (which inherit the descriptor): /proc/self/fd/<n>.
  std::string ProcPath() const { return "/proc/self/fd/" + std::to_string(fd.get()); }
};

enum class MapOutcome {
  kMapped,
  kCorrupt,  // ours, but not a usable segment: *error says what it was
  kFailed,
};

// Checks the segment open at `fd` (regular file, owned by us, mode 0600, size,
// magic, layout version, geometry) and maps it. `what` names it in messages.
MapOutcome MapSegment(UniqueFd fd, const std::string& what, MappedSegment* out, Status* error);

// Creates an unnamed segment in `place` (O_TMPFILE; where unsupported, a
// temporary name unlinked at once), attached by `self` in slot 0 with
// `attach_flags` (kAttach*). Only the metadata is backed now (see
// FileBacking). Errors: the filesystem is full or not writable.
Status CreateSegment(const SegmentPlace& place, const LayoutPlan& plan, const ProcessIdentity& self,
                     std::uint32_t attach_flags, MappedSegment* out);

// Links the segment under <base><suffix> (false if that name exists).
bool NameSegment(const SegmentPlace& place, const MappedSegment& segment, const char* suffix);
// Removes <base><suffix> if it still names this segment.
void UnnameSegment(const SegmentPlace& place, const MappedSegment& segment, const char* suffix);
// Opens <base><suffix> (no symbolic links followed); an invalid descriptor
// and an OK status when it does not exist. A symbolic link or a FIFO there
// (nothing Prescient makes) is removed, with a notice.
UniqueFd OpenNamed(const SegmentPlace& place, const char* suffix, Status* error,
                   std::vector<std::string>* notices);

// Backs extents of a mapped segment's data area: posix_fallocate on the
// segment's descriptor, or MADV_POPULATE_WRITE where the filesystem cannot
// fallocate (or the descriptor was closed under us). Either returns ENOSPC on
// a full filesystem where a plain write would raise SIGBUS. A range outside
// the mapping is refused: fallocate would grow the file, and a corrupt extent
// could otherwise fill the node's memory.
//
// Rows are written through the descriptor (WriteThrough) only while it still
// names the file that was mapped: a descriptor closed and reused by the host
// program must never receive the cache's bytes.
class FileBacking final : public SegmentBacking {
 public:
  explicit FileBacking(const MappedSegment& segment);
  Status Back(std::uint64_t offset, std::uint64_t length) const noexcept override;
  using SegmentBacking::WriteThrough;
  bool WriteThrough(std::uint64_t offset,
                    std::span<const struct iovec> pieces) const noexcept override;

 private:
  int fd_;
  unsigned char* base_;
  std::uint64_t size_;
  // The mapped file's identity (0, 0: unknown, never written through).
  std::uint64_t dev_ = 0;
  std::uint64_t ino_ = 0;
  // The last range this process backed, in pages: (first page << 32) | count.
  // Pages once backed stay backed (nothing punches holes in a segment), so a
  // range inside it needs no second fallocate: Grow under the lock then finds
  // the extent BackAhead backed without it.
  mutable std::atomic<std::uint64_t> last_backed_{0};
};

}  // namespace prescient::cache::detail

#endif  // PRESCIENT_CACHE_CORE_SEGMENT_FILE_H_
