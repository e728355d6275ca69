// Creating, opening and removing the segment file.
//
// A segment appears under its final name only fully initialised: the creator
// builds it under a private temporary name (<path>.init.<pid>), reserves every
// page with posix_fallocate (so a full /dev/shm fails here, with ENOSPC,
// instead of a SIGBUS on first touch), writes the tables, attaches itself and
// then link()s it into place; link fails if another process won the race. So
// no opener ever sees a half-built segment, and a creator that dies leaves
// only a temporary file, which the next creator deletes.
//
// The mapping itself is a Boost.Interprocess file_mapping + mapped_region
// (RAII: the region unmaps itself). Nothing else of Boost.Interprocess is
// used: its mutexes and managed segments do not survive a holder's death
// (see cache/README.md), so the segment's contents are plain arrays guarded
// by one lock that survives its holder's death (shm_sync.h).
#ifndef PRESCIENT_CACHE_CORE_SEGMENT_FILE_H_
#define PRESCIENT_CACHE_CORE_SEGMENT_FILE_H_

#include <sys/types.h>

#include <boost/interprocess/file_mapping.hpp>
#include <boost/interprocess/mapped_region.hpp>
#include <cstdint>
#include <string>
#include <utility>

#include "cache/base/status.h"
#include "cache/core/process_identity.h"
#include "cache/core/segment_layout.h"
#include "cache/core/segment_tables.h"

namespace prescient::cache::detail {

// A mapped segment file; move-only, unmapped when destroyed (or reset). No
// descriptor is kept: the mapping outlives it, and a descriptor held for the
// process's lifetime would be inherited by programs it executes (Boost opens
// files without O_CLOEXEC).
struct MappedSegment {
  boost::interprocess::mapped_region region;
  dev_t device = 0;  // the file's identity, to unlink only this file later
  ino_t inode = 0;
  // The geometry checked when the segment was opened (CheckedGeometry) or
  // planned when it was created: the only copy the process trusts.
  LayoutPlan geometry;

  void* base() const { return region.get_address(); }
  std::uint64_t size() const { return region.get_size(); }
};

// Backs extents of a mapped segment's data area: fallocate through a
// short-lived descriptor reopened by path (checked to be the mapped file), or
// MADV_POPULATE_WRITE where the filesystem cannot fallocate. Either returns
// an error on a full filesystem where a plain write would raise SIGBUS.
class FileBacking final : public SegmentBacking {
 public:
  FileBacking(std::string path, const MappedSegment& segment)
      : path_(std::move(path)),
        base_(static_cast<unsigned char*>(segment.base())),
        device_(segment.device),
        inode_(segment.inode) {}
  Status Back(std::uint64_t offset, std::uint64_t length) const noexcept override;

 private:
  std::string path_;
  unsigned char* base_;
  dev_t device_;
  ino_t inode_;
};

enum class OpenOutcome {
  kOpened,
  kNotFound,
  kCorrupt,  // a file of ours that is not a usable segment: unlinked; *error says what it was
  kFailed,
};

// Maps an existing segment after checking owner, mode 0600, size, header and
// geometry (CheckedGeometry).
OpenOutcome OpenSegment(const std::string& path, MappedSegment* out, Status* error);

enum class CreateOutcome { kCreated, kExists, kFailed };

// Creates the segment at `path`, attached by `self` in attach slot 0.
CreateOutcome CreateSegment(const std::string& path, const LayoutPlan& plan, bool keep_after_exit,
                            const ProcessIdentity& self, MappedSegment* out, Status* error);

// Unlinks `path` if it still names this segment's file (not a newer one).
void UnlinkIfSame(const std::string& path, const MappedSegment& segment);

// Unmaps the segment (the file stays).
void UnmapSegment(MappedSegment* segment);

}  // namespace prescient::cache::detail

#endif  // PRESCIENT_CACHE_CORE_SEGMENT_FILE_H_
