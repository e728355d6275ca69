// The connector's side of the node-shared cache.
//
// When a dataset of a read-only file opens, CacheClient prepares it (all the
// HDF5 work, in that callback), opens the node's segment if this process has
// not yet (one warning and plain forwarding if that fails: full /dev/shm, bad
// size), registers the dataset by identity and lets the schedule follower bind
// it. A simple read is then served in phases (TryServe): the dataset, the
// cache entries its rows are in, the schedule (where the read is, what its
// rows are keyed by), the cache's ReadRows (hits copied, misses loaded on
// this thread and published, rows in flight waited for), and small rows
// copied out of their entries. A read it cannot serve exactly is left to the
// caller to forward.
//
// Thread-safe. Survives fork(): a forked DataLoader worker uses the same
// segment (NodeCache attaches it on first use) and its own copy of this
// object's registry; fork() itself runs no work of ours (the handlers only
// take and release locks).
#ifndef PRESCIENT_VOL_SERVE_CACHE_CLIENT_H_
#define PRESCIENT_VOL_SERVE_CACHE_CLIENT_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cache/base/mutex.h"
#include "cache/core/node_cache.h"
#include "vol/objects/object.h"
#include "vol/read/read_hook.h"
#include "vol/runtime/stats.h"
#include "vol/schedule/schedule_follower.h"
#include "vol/schedule/schedule_watch.h"
#include "vol/serve/admission_worker.h"
#include "vol/serve/cached_dataset.h"
#include "vol/serve/node_snapshot.h"
#include "vol/serve/resolution_memo.h"
#include "vol/serve/small_dataset_census.h"

namespace prescient::vol {

class CacheClient {
 public:
  static CacheClient& Get();

  // True when the read was served into `buf` (complete; do not forward).
  // False: nothing was written that matters; forward the read (its reason is
  // then record->forward_reason). What the read cost goes into `record`
  // (committed by the caller). Never throws.
  bool TryServe(const VolObject& dataset, const ReadRequest& request, void* buf,
                ReadRecord* record) noexcept;

  // Called when a dataset of a read-only file opens: prepares it for caching
  // (all HDF5 work, in this callback), opens the node segment if needed,
  // registers the dataset and binds the schedule to it. A DataLoader's main
  // process, which only opened the dataset to ask its length, is so attached
  // before it starts its workers and keeps the segment alive while
  // generations of workers come and go; fork() itself does no work.
  void DatasetOpened(const VolObject& dataset) noexcept;

  // Asked when a dataset of a read-only file opens, before it is identified:
  // true when it is not worth caching, and its reads go to HDF5 unserved.
  // That is a contiguous dataset of fewer bytes than
  // Options::min_dataset_bytes, unless a schedule file is given (it may name
  // any dataset); in a followed process, only once its file has had more than
  // a few (SmallDatasetCensus: one dataset per sample, which the follower's
  // learned map cannot describe; labels beside the samples, or the fields of a
  // file per sample, it can, and they stay cached).
  // Opening it read its object header from storage, and the bytes of such a
  // dataset are usually stored right after it and come with that read (the
  // kernel reads ahead 128 KiB by default), so a hit would save no read;
  // identifying, preparing and registering each dataset cost more than HDF5's
  // read of it, and a layout of one dataset per sample opens tens of
  // thousands of them per process and epoch (examples/bench/RESULTS.md, "One
  // dataset per sample").
  bool TooSmallToCache(const VolObject& dataset) noexcept EXCLUDES(mutex_);

  // Detaches from the segment (connector shutdown): the last process of the
  // node unlinks it unless PRESCIENT_KEEP_CACHE is set.
  void Shutdown() noexcept;
  // Places every row waiting for the admission thread and stops it; reads
  // after this place their own rows. Before the final statistics.
  void DrainAdmissions() noexcept EXCLUDES(mutex_);

  // The node segment's options for `options` and the schedule (may be null):
  // its dataset table holds every field of every file the sample map names.
  // Every process of the node, and its agent, opens the segment with these.
  static cache::CacheOptions SegmentOptions(const Options& options, const ScheduleBinding* binding);

  // Tests only: makes `segment` this process's node segment, as the first
  // dataset's opening would have, and returns the one it replaces (the fork
  // handlers then hold its locks across fork(); tests/unit/vol/fork_gate_test).
  std::unique_ptr<cache::NodeCache> ExchangeSegmentForTesting(
      std::unique_ptr<cache::NodeCache> segment) EXCLUDES(mutex_);

 private:
  // TryServe for `stored_bytes` of the stored type's elements into `buf`
  // (the caller's buffer, or a staging one for a read of compound fields).
  bool ServeStored(const VolObject& dataset, const ReadRequest& request, std::uint64_t stored_bytes,
                   void* buf, ReadRecord* record) noexcept;

  using Identity = std::pair<std::uint64_t, std::uint64_t>;
  // Identities are hashes already (DatasetIdentity): any mix of the two halves.
  struct IdentityHash {
    std::size_t operator()(const Identity& id) const noexcept {
      return static_cast<std::size_t>(id.first ^ (id.second * 0x9e3779b97f4a7c15ull));
    }
  };

  CacheClient();
  // They take and release mutex_ across fork(), beyond what the analysis follows.
  static void AtForkPrepare() NO_THREAD_SAFETY_ANALYSIS;
  static void AtForkParent() NO_THREAD_SAFETY_ANALYSIS;
  static void AtForkChild() NO_THREAD_SAFETY_ANALYSIS;

  // The dataset's registration (made on first use) and the cache it is in;
  // a null dataset if it is not cacheable.
  struct Registered {
    std::shared_ptr<CachedDataset> dataset;
    cache::NodeCache* cache = nullptr;  // set once, never replaced while the process reads
    std::uint64_t capacity = 0;
  };
  Registered Lookup(const VolObject& dataset) EXCLUDES(mutex_);
  cache::NodeCache* OpenCacheLocked() REQUIRES(mutex_);
  std::shared_ptr<CachedDataset> PreparedLocked(const VolObject& dataset) REQUIRES(mutex_);
  bool RegisterLocked(const std::shared_ptr<CachedDataset>& cached) REQUIRES(mutex_);
  // PRESCIENT_FOLLOW: when a new schedule file was published at the path,
  // follows it from now on (the datasets registered so far are bound to it).
  void FollowNewScheduleLocked() REQUIRES(mutex_);
  // A dataset the prefetch leader prepared: registered, or the known one.
  std::shared_ptr<CachedDataset> Adopt(std::shared_ptr<CachedDataset> prepared) EXCLUDES(mutex_);

  // The loader of a read: `missing` entries, plus the rest of their chunks
  // for chunked data (claimed, loaded in the same plan, then published).
  static cache::Status LoadWithReadAround(cache::NodeCache& cache, const CachedDataset& cached,
                                          const VolObject& dataset,
                                          std::span<const std::uint64_t> missing,
                                          std::span<std::byte* const> dest, LoadCounters* load,
                                          const cache::NextUseOracle* oracle,
                                          std::uint64_t* read_around);

  cache::Mutex mutex_;  // held across fork()
  bool open_attempted_ GUARDED_BY(mutex_) = false;
  std::unique_ptr<cache::NodeCache> cache_ GUARDED_BY(mutex_);
  // Copies loaded rows into cache_ behind the readers (PRESCIENT_ADMIT_BEHIND);
  // made with the segment, drained before it goes.
  std::unique_ptr<AdmissionWorker> admission_ GUARDED_BY(mutex_);
  // The segment's data capacity, read once at open (constant for its life).
  std::uint64_t capacity_bytes_ GUARDED_BY(mutex_) = 0;
  // Looked up at every open and read: a tree of the tens of thousands of
  // datasets a job of one dataset per sample opens cost a dozen cache misses
  // a lookup.
  std::unordered_map<Identity, std::shared_ptr<CachedDataset>, IdentityHash> datasets_
      GUARDED_BY(mutex_);
  bool warned_table_full_ GUARDED_BY(mutex_) = false;
  SmallDatasetCensus small_datasets_ GUARDED_BY(mutex_);  // follow mode only
  // PRESCIENT_SCHEDULE, opened with the segment; readers load the pointer
  // without the lock. Without PRESCIENT_FOLLOW it is set once and never
  // replaced. In follow mode a newer schedule replaces it (under the lock, in
  // a read callback, so no other application read is inside it: HDF5
  // serialises them), and the replaced follower is kept until its prefetch
  // thread has stopped.
  // The node's memo of prepared datasets (schedule or follow mode), made with
  // the segment; the followers use it (declared first: it outlives them).
  std::unique_ptr<ResolutionMemo> memo_ GUARDED_BY(mutex_);
  std::unique_ptr<ScheduleFollower> follower_owner_ GUARDED_BY(mutex_);
  std::atomic<ScheduleFollower*> follower_{nullptr};
  NodeSnapshot node_snapshot_;  // the node's counters into this process's statistics
  std::unique_ptr<ScheduleWatch> watch_ GUARDED_BY(mutex_);  // follow mode only
  struct Retired {
    std::unique_ptr<ScheduleFollower> follower;
    long pid = 0;  // the process that retired it
  };
  std::vector<Retired> retired_ GUARDED_BY(mutex_);
};

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_SERVE_CACHE_CLIENT_H_
