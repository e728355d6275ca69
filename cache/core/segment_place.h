// Where a node's cache files live, opened once per Open: the directory (held
// open; files are reached relative to it) and their base name.
#ifndef PRESCIENT_CACHE_CORE_SEGMENT_PLACE_H_
#define PRESCIENT_CACHE_CORE_SEGMENT_PLACE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "cache/base/status.h"
#include "cache/core/cache_options.h"
#include "cache/core/segment_file.h"

namespace prescient::cache::detail {

// What kind of filesystem shm_dir is on (statfs f_type).
struct FilesystemKind {
  enum Kind { kMemory, kDisk, kNetwork } kind;
  const char* name;  // "tmpfs", "ext4", "nfs", ... or "unknown"
};
FilesystemKind ClassifyFilesystem(std::int64_t magic);

// Opens the directory of `options` for the node's files. Things a user should
// hear about once are appended to `notices`. shm_dir must be on a memory
// filesystem (tmpfs, ramfs, hugetlbfs) or a local disk one (accepted with a
// notice: node-local NVMe is a legitimate choice); a network filesystem is
// refused (it is shared with other nodes, and every page would cross the
// network).
Result<SegmentPlace> OpenSegmentPlace(const CacheOptions& options,
                                      std::vector<std::string>* notices);

}  // namespace prescient::cache::detail

#endif  // PRESCIENT_CACHE_CORE_SEGMENT_PLACE_H_
