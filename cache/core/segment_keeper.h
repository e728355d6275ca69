// Keeping a node's segment alive between DataLoader worker generations.
//
// The segment is unnamed (segment_file.h): it lives exactly as long as some
// process holds it. That is right for a job's end, and wrong in the middle of
// the most common PyTorch set-up: the training process never reads HDF5
// itself, and its DataLoader forks fresh workers every epoch (persistent_workers
// off) which open the file lazily. When one epoch's workers exit, nobody holds
// the segment, and the next epoch's workers would start cold.
//
// So a process that opens the cache on behalf of an anchor (the process the
// connector was initialised in, which forked it) starts a keeper: the small
// executable prescient-cache-keeper, which holds the segment's descriptor and
// nothing else, and exits when the anchor exits (or the segment is replaced in
// the registry). The segment's lifetime is then the anchor's: still bounded
// by the job, whatever way it ends, and no longer by one epoch's workers.
//
// The keeper is started with posix_spawn (no fork of the caller's address
// space: a forked copy of a PyTorch worker would pin its memory), in its own
// session, with the segment as descriptor 3, /dev/null as 0-2 and no other
// descriptor (a DataLoader's pipes must not be held open by it).
#ifndef PRESCIENT_CACHE_CORE_SEGMENT_KEEPER_H_
#define PRESCIENT_CACHE_CORE_SEGMENT_KEEPER_H_

#include <string>

#include "cache/base/status.h"
#include "cache/core/process_identity.h"

namespace prescient::cache::detail {

// The keeper's descriptor for the segment.
inline constexpr int kKeeperSegmentFd = 3;

// Starts `executable` holding `segment_fd` while `anchor` lives; `registry_path`
// is the node's registry (the keeper exits when it names another segment).
// Returns the keeper's identity.
Result<ProcessIdentity> SpawnKeeper(const std::string& executable, int segment_fd,
                                    const ProcessIdentity& anchor,
                                    const std::string& registry_path);

}  // namespace prescient::cache::detail

#endif  // PRESCIENT_CACHE_CORE_SEGMENT_KEEPER_H_
