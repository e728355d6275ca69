// CacheOptions: every setting of the node-shared cache, as one typed struct.
//
// The cache reads no environment variables. vol/ parses PRESCIENT_CACHE_SIZE
// (with ParseByteSize below), the node identity override and the keep flag
// once, fills this struct and hands it to NodeCache::Open. Tests and tools fill
// it directly.
#ifndef PRESCIENT_CACHE_CORE_CACHE_OPTIONS_H_
#define PRESCIENT_CACHE_CORE_CACHE_OPTIONS_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "cache/base/status.h"
#include "cache/core/process_identity.h"

namespace prescient::cache {

struct CacheOptions {
  // Size of the whole shared segment (metadata included, about 1.8% with
  // 4 KiB blocks). 0 = DefaultCapacityBytes(shm_dir). The first process of a
  // node creates the segment; later processes use its size, whatever they ask.
  std::uint64_t capacity_bytes = 0;

  // Node identity in the segment name. Empty = the host name. Setting it lets
  // several "nodes" share one machine (each gets its own segment).
  std::string node_id;

  // Keep the segment (and its rows) when the last process detaches, so the
  // next job on the node starts warm. Otherwise the last process unlinks it.
  bool keep_after_exit = false;

  // The process this one works for, when it is not itself: the segment is
  // held by a keeper process (keeper_executable, segment_keeper.h) for as long
  // as `anchor` lives, so DataLoader workers that exit every epoch leave their
  // rows to the next epoch's workers even when the anchor (the training
  // process) never opens the cache. pid 0, or the calling process itself: no
  // keeper. An empty or missing executable: no keeper (one notice).
  ProcessIdentity anchor;
  std::string keeper_executable;

  // Where segments live and how they are named (SegmentPath).
  // /dev/shm is what shm_open uses; tests point both elsewhere.
  std::string shm_dir = "/dev/shm";
  std::string name_prefix = "prescient-cache";

  // Allocation unit. A row occupies ceil(row_bytes / block_bytes) blocks, so
  // rows much smaller than a block waste space: pick a smaller block for
  // datasets of tiny rows. Power of two in [256, 1 MiB].
  std::uint32_t block_bytes = 4096;

  // Distinct datasets the segment can describe (a dataset key is never
  // forgotten while the segment lives); RegisterDataset fails beyond 7/8 of
  // it. One-sample-per-file datasets need one per file and field. Each costs
  // 48 bytes of segment metadata, and a process only the pages of the records
  // it uses. 0 = DatasetTableSize(capacity).
  std::uint32_t max_datasets = 0;

  // Row descriptors in the segment. 0 = one per block plus 1/16 for rows being
  // loaded: never the limit. A smaller number saves metadata (~60 bytes/row).
  std::uint64_t max_rows = 0;

  // Give up on the segment lock after this long (a live process holding it
  // that long is stopped or hung); the call fails and the caller falls back.
  std::chrono::milliseconds lock_timeout{10000};

  // While waiting for a row another process loads, check every this often
  // whether the loader is still alive (and take the row over if not).
  std::chrono::milliseconds liveness_poll{50};

  // A live loader (or prefetch leader) that has made no progress for this
  // long (no call into the cache, no CPU time: stopped by SIGSTOP or a
  // debugger, a frozen cgroup, blocked in the kernel) is stuck: a reader
  // waiting for its rows takes them over and loads them itself, and another
  // process takes the leadership. A busy loader is never overtaken by this.
  std::chrono::milliseconds stall_timeout{1500};

  // Even a loader that makes progress is overtaken after this long (it may be
  // working on other rows): the waiting reader takes the rows over.
  std::chrono::milliseconds wait_timeout{10000};

  // A reader waits for a row another process is loading this many times as
  // long as its own loads take on average (at least 0.1 ms, at most
  // liveness_poll), then loads the row itself without caching it (the
  // loader still does). A loader holding a claim that long is busy with
  // other rows first (a prefetch round reads half a window in deadline
  // order). 0: wait until the row is published (each row is then read once
  // per node, at the cost of the wait); also what a process that has not
  // loaded anything yet does.
  std::uint32_t wait_patience_loads = 2;

  // This process loads rows for the whole node (the node agent, whose loads
  // are each row's one read from the shared file system, or a peer's copy):
  // readers wait for its claims until they are published, whatever their
  // wait_patience_loads.
  bool claims_awaited_in_full = false;
};

// Parses "8GiB", "512 MiB", "1.5G", "4096", "100MB" (case-insensitive units B,
// K/KB/KiB, M/MB/MiB, G/GB/GiB, T/TB/TiB; KB = 1000, KiB and the bare K = 1024;
// a number alone is bytes). Errors name the text and the accepted forms.
Result<std::uint64_t> ParseByteSize(std::string_view text);

// min(50% of the free space of shm_dir, 25% of physical RAM), rounded down to
// a MiB; 0 when neither can be determined.
std::uint64_t DefaultCapacityBytes(const std::string& shm_dir);

// The dataset table a segment of `capacity` bytes gets by default: one record
// per 2 KiB of capacity (about 2.3% of it as metadata), at least 4,096 and at
// most 262,144 (12 MiB).
std::uint32_t DatasetTableSize(std::uint64_t capacity);
// The dataset table a segment opened with `options` gets: max_datasets, or
// DatasetTableSize of its capacity (capacity_bytes, or the default size).
std::uint32_t DatasetTableFor(const CacheOptions& options);

// The node identity used when CacheOptions::node_id is empty: the host name.
std::string DefaultNodeId();

// <name_prefix>-v<layout version>-u<uid>-<node>, with characters of the node
// id other than [A-Za-z0-9._-] replaced by '_': the base name of the node's
// files (<base>.lock, the registry; <base>.kept, a kept segment).
std::string SegmentBaseName(const CacheOptions& options);

// prescient-u<uid>: the directory of this user's cache files in shm_dir, made
// 0700; if another user took that name, prescient-u<uid>-<random> instead
// (segment_place.cc).
std::string UserDirectoryName();

// <shm_dir>/<UserDirectoryName>/<SegmentBaseName>: where the node's files
// are, when the per-user directory has its usual name (the segment itself is
// unnamed; see cache/README.md, "Lifetime").
std::string SegmentPath(const CacheOptions& options);

}  // namespace prescient::cache

#endif  // PRESCIENT_CACHE_CORE_CACHE_OPTIONS_H_
