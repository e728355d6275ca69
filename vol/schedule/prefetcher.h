// Reading ahead of the loaders, on the node's prefetch leader.
//
// Every process following a schedule runs one small thread that tries, every
// quarter second, to become the node's leader (NodeCache::TryBecomeLeader;
// forked children never inherit leadership, and when the leader exits or dies
// another process takes over within a second). The leader reads ahead of each
// local rank on its own (ranks do not move in lockstep): from the step the
// rank has reached over a look-ahead window, every field of every sample of
// those steps, in rounds of half the window (PrefetchRound: claim, coalesce,
// read on the I/O threads, publish; pread and decode only, never an HDF5
// call except to prepare a file the application has not opened yet, see
// DatasetResolver).
//
// A file that holds only a few samples (one-sample-per-file layouts) is not
// prepared through HDF5 ahead of the application: the application opens it
// anyway to read its sample, so a second open on the leader would cost as much
// as the read it saves, under HDF5's lock. The leader reads such a file into
// the page cache instead (posix_fadvise WILLNEED, no HDF5), so the
// application's own open and read find it there ("files_warmed").
//
// The window is sized from the cache's capacity (the rows of a window must
// fit in half of it, so a round never displaces what the next one needs; on
// the node agent, three quarters of the room beside its owned rows) and
// from the node's consumption rate (about kWindowSeconds of reading ahead,
// once the rate is known): a fast loader gets a long window, a slow one does
// not tie up the cache with rows it will read minutes later.
#ifndef PRESCIENT_VOL_SCHEDULE_PREFETCHER_H_
#define PRESCIENT_VOL_SCHEDULE_PREFETCHER_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cache/core/node_cache.h"
#include "cache/core/process_identity.h"
#include "cache/io/executor.h"
#include "vol/schedule/prefetch_round.h"
#include "vol/schedule/rank_progress.h"
#include "vol/schedule/schedule_binding.h"
#include "vol/schedule/stop_caller.h"

namespace prescient::vol {

class ScheduleFollower;

class Prefetcher {
 public:
  static constexpr double kWindowSeconds = 4.0;
  // The first deadline slice of a round (PrefetchRound::SetLoaderFront): the
  // steps the loaders read in about the time of one long coalesced read.
  static constexpr double kSliceSeconds = 0.05;

  Prefetcher(cache::NodeCache& cache, ScheduleFollower& follower, const RankProgress& progress,
             unsigned io_threads);
  // Stops and joins the thread when called in the process that started it.
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // Starts this process's leadership thread if it has none (a forked child
  // calls this again: threads do not survive fork).
  void EnsureRunning();
  // Before EnsureRunning, on the node agent: take the leadership rather than
  // wait for it, fetch rows other nodes own through `remote`, and size the
  // window from the cache less the `held_samples` this node owns (its rows
  // are never displaced by others: the window must fit in what is left).
  // Its window may take three quarters of that room, not half: the room
  // holds only rows other nodes own, which a peer serves again cheaply if
  // the window displaces them, while a loader that overtakes the window
  // reads from storage.
  void ServeAsNodeAgent(RemoteRows* remote, std::uint64_t held_samples) {
    take_leadership_ = true;
    remote_ = remote;
    held_samples_ = held_samples;
    window_quarters_ = 3;
  }
  // Stops the thread and joins it (in the process that started it); true
  // when it is joined. Called holding HDF5's lock while the thread is
  // resolving a dataset (which waits for that lock, then for the cache
  // client's, which the terminate callback holds too), it cannot be joined:
  // it is left to run on, told to touch nothing once its resolution returns,
  // and Stop returns false. The caller must then never destroy this object
  // (the process is ending).
  bool Stop(StopCaller caller = StopCaller::kAnyThread);
  // Asks the thread to stop without waiting for it (a caller inside an HDF5
  // callback must not join a thread that may be waiting for HDF5's lock).
  void RequestStop() { stop_ = true; }
  // True when this process runs no thread of this prefetcher (never started,
  // or its thread returned): it can be destroyed without waiting.
  bool Idle() const { return running_pid_.load() != cache::CurrentPid() || finished_.load(); }

 private:
  void Run() noexcept;
  // Runs `work` (a resolution, or the resolver's release) unless a stop was
  // asked, with resolving_ set (see Stop).
  template <typename Work>
  void WhileResolving(Work&& work);
  // One round for every local rank behind its window; false if none was.
  bool Round(cache::io::Executor& executor);
  std::uint64_t WindowSteps(std::span<const std::uint64_t> progress);
  // capacity_steps_ from the bytes of a sample, once they are known (a map
  // without row sizes learns them as its datasets bind; until then rounds
  // use the smallest window).
  void SizeWindowFromCapacity();
  // The dataset of `ref` to prefetch rows of, or null: unknown and not worth
  // preparing (then its small file is warmed, once per round: `warmed`).
  std::shared_ptr<CachedDataset> DatasetToPrefetch(FieldRef ref, std::set<std::string>& warmed);
  // False for a dataset the node's readers read in narrow parts of rows (a
  // 3-D patch takes a ninth of each z-plane: cache::DatasetHint) unless whole
  // rows stay until their other parts are read (CachedDataset::RowsStayCached):
  // loaded ahead into a cache that cannot keep them, whole rows cost many
  // times the bytes the reads take, and are evicted before most are read.
  // The readers then serve such reads from the rows the cache holds, the rest
  // through HDF5 (CacheClient::TryServe).
  bool WholeRowsPayAhead(const CachedDataset& dataset);

  cache::NodeCache& cache_;
  ScheduleFollower& follower_;
  const RankProgress& progress_;
  unsigned io_threads_;
  bool take_leadership_ = false;
  RemoteRows* remote_ = nullptr;
  std::uint64_t held_samples_ = 0;
  std::uint64_t window_quarters_ = 2;  // of the cache's room a window may take
  std::uint64_t capacity_steps_ = 2;   // what half the cache holds, in steps of every local rank
  bool capacity_sized_ = false;        // capacity_steps_ comes from known sample bytes
  std::vector<std::uint64_t> done_until_;  // per local rank: steps already prefetched
  // Per local rank: the front of the last round (kNoFront, above every step,
  // before it reported). A rank first seen, or seen behind where it was
  // (restarted), is prefetched for afresh from its front: the rows of its
  // first window may have been evicted while it had not started reading.
  static constexpr std::uint64_t kNoFront = UINT64_MAX;
  std::vector<std::uint64_t> last_front_;
  // Consumption rate: the slowest rank's step over time.
  std::chrono::steady_clock::time_point rate_since_{};
  std::uint64_t rate_from_step_ = 0;
  double steps_per_second_ = 0;
  // Whether the current round resolved a dataset, and when one last did:
  // the resolver keeps its files open until rounds have resolved none for a
  // while (Round).
  bool resolved_in_round_ = false;
  std::chrono::steady_clock::time_point last_resolved_{};
  std::atomic<bool> stop_{false};
  // Set by the thread around a resolution (HDF5 calls, then the cache
  // client's lock) and read by Stop: both sequentially consistent, so that
  // either Stop sees it set or the thread sees stop_ before it resolves.
  std::atomic<bool> resolving_{false};
  std::atomic<bool> abandoned_{false};  // Stop could not join: touch nothing
  std::atomic<bool> finished_{false};   // the thread of running_pid_ returned
  std::atomic<long> running_pid_{0};
  std::unique_ptr<std::thread> thread_;
};

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_SCHEDULE_PREFETCHER_H_
