// The process's admission thread (cache/core/admission_queue.h): rows a read
// loaded on a miss are returned to the caller at once, and their copy into
// the node's segment (page allocation, copy, placing them under the segment
// lock) is made here, on one thread of the process that claimed them.
//
// Bounded: at most `budget_bytes` of rows wait at once; a read that finds the
// budget spent publishes its rows itself, as without a queue.
//
// Only on a spare CPU (only_on_spare_cpu, PRESCIENT_ADMIT_BEHIND_WHEN): the
// thread does the reader's work plus a hand-over (a copy or a second read, a
// wake-up), so it shortens the reader's path only on a core that would
// otherwise idle. While the machine's runnable threads, besides the reader
// and this thread, fill the CPUs the process may use (cache/io/cpu_headroom.h),
// Reserve declines and the reader places its rows itself; so it does for a
// read of fewer than kMinHandOverBytes, whatever the load. Measured on two
// cores, two DataLoader workers, 16 KiB rows: the thread cost about 0.7 s of
// CPU per cold epoch of 40,000 samples, and a training process reading large
// samples without workers still hands nearly every read over
// (examples/bench/RESULTS.md, "The admission thread runs only on a spare CPU").
//
// Rows of a dataset stored as it is in the file (ReadRowsAgainFrom: raw
// layout, no filters), handed over kReadAgainMinBytes or more at a time, are
// not copied by the reader at all: the thread reads them again with the
// dataset's raw loader, from the page cache the reader's read just filled, as
// the prefetcher reads rows (raw pread at offsets the caller's thread obtained
// from HDF5). That copy of a whole read was the reader's largest cost left on
// a miss. The thread never calls HDF5.
//
// Fork: a DataLoader worker inherits the object but not the thread. Rows
// queued in the parent are the parent's (its claims, its thread publishes
// them); the child forgets them (ForgetAfterForkInChild) and starts a thread
// of its own on its first use.
#ifndef PRESCIENT_VOL_SERVE_ADMISSION_WORKER_H_
#define PRESCIENT_VOL_SERVE_ADMISSION_WORKER_H_

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "cache/base/mutex.h"
#include "cache/core/admission_queue.h"
#include "cache/core/node_cache.h"
#include "cache/io/cpu_headroom.h"
#include "cache/io/executor.h"

namespace prescient::vol {

class CachedDataset;

struct AdmissionWorkerOptions {
  std::uint64_t budget_bytes = 16ull << 20;  // PRESCIENT_ADMIT_BEHIND
  bool only_on_spare_cpu = true;             // PRESCIENT_ADMIT_BEHIND_WHEN=spare-cpu
  // With only_on_spare_cpu and no CPU spare, rows loaded in runs of at least
  // this many bytes on average are delivered unkept (LeavesUnkept); 0 (the
  // default) = kept.
  std::uint64_t busy_unkept_run_bytes = 0;  // PRESCIENT_BUSY_UNKEPT_RUN
  // The machine's load, for only_on_spare_cpu (tests inject their own).
  cache::io::CpuHeadroom::Sampler cpu_load = cache::io::ReadCpuLoad;
};

class AdmissionWorker final : public cache::AdmissionQueue {
 public:
  explicit AdmissionWorker(AdmissionWorkerOptions options)
      : budget_bytes_(options.budget_bytes),
        only_on_spare_cpu_(options.only_on_spare_cpu),
        busy_unkept_run_bytes_(options.busy_unkept_run_bytes),
        headroom_(cache::io::CpuHeadroom::kDefaultRefresh, std::move(options.cpu_load)) {}
  ~AdmissionWorker() override { Drain(); }
  AdmissionWorker(const AdmissionWorker&) = delete;
  AdmissionWorker& operator=(const AdmissionWorker&) = delete;

  // Publishes into `cache` from now on, and sets itself as its queue.
  void Attach(cache::NodeCache* cache) EXCLUDES(mu_);
  // Publishes everything queued, stops the thread and detaches from the
  // cache (which reads no longer hand rows to). Before the cache goes away.
  void Drain() noexcept EXCLUDES(mu_);

  // Rows of `dataset` (registered at `slot`) are read again by the thread
  // when RowsReadAgainCheaply(*dataset); other datasets are ignored.
  void ReadRowsAgainFrom(cache::DatasetSlot slot, std::shared_ptr<const CachedDataset> dataset)
      EXCLUDES(mu_);
  // Stored as they are in the file (a raw layout without filters): reading
  // them again is one pread per run of rows, no decoding.
  static bool RowsReadAgainCheaply(const CachedDataset& dataset);
  // Rows of the dataset at `slot`, stored as they are in the file
  // (RowsReadAgainCheaply), may be left unkept while no CPU is spare
  // (LeavesUnkept): reading them again later costs a copy, as a hit does.
  // Rows of other datasets are always kept: their hits save decoding.
  void MayLeaveUnkept(cache::DatasetSlot slot) EXCLUDES(mu_);
  // Rows of the dataset at `slot` are never taken: their readers place them.
  // For small rows cached several to an entry (CachedDataset::grouped), as
  // they were while such entries were a block each: a sample stored as a
  // dataset of its own, 4 entries of 64 KiB, went through the thread (read
  // again, copied in) on cores two DataLoader workers filled, and its first
  // epoch took 15.0 s of CPU where its readers placing it took 9.6 s
  // (examples/bench/RESULTS.md, "Entries of 64 KiB").
  void LeaveToReaders(cache::DatasetSlot slot) EXCLUDES(mu_);

  // Reading again is for hand-overs of at least this many bytes, where the
  // reader's copy is long (DeepCAM's 3.5 MB samples, where it was measured)
  // and the pread's fixed cost (a system call, a page-cache lookup per page)
  // is small beside it. For a 16 KiB row that fixed cost is about the copy it
  // saves, paid on a thread that competes for the cores DataLoader workers
  // already fill.
  static constexpr std::uint64_t kReadAgainMinBytes = 256 * 1024;
  // With only_on_spare_cpu, a read hands over at least this many bytes, or
  // places its rows itself. Below it the hand-over costs about what it saves
  // even on a spare core: the reader copies the rows into the thread's buffer
  // (no reading again below kReadAgainMinBytes) and wakes the thread, which
  // places them as the reader would have. One process reading 16 KiB rows
  // without DataLoader workers (a spare core on two): a cold first epoch at a
  // cache of a quarter of the data took 2.52 s with hand-overs, 2.30 s
  // without, and 0.3 s more CPU (examples/bench/RESULTS.md, "Latest").
  static constexpr std::uint64_t kMinHandOverBytes = kReadAgainMinBytes;
  bool ReadsRowsAgain(cache::DatasetSlot ds, std::uint64_t bytes) noexcept override EXCLUDES(mu_);
  // True, with only_on_spare_cpu, for runs of busy_unkept_run_bytes or more
  // of a dataset MayLeaveUnkept named, while no CPU is spare for the thread:
  // the reader would copy them into fresh shared memory on a core the loop
  // needs, for hits that save little when the loop's own work dominates (a
  // sample read whole by a CPU-bound loader: fastMRI's slices, RESULTS.md,
  // "A fifth public loader"; where hits pay, as PDEBench's, keeping wins, so
  // this is on request). Runs of a batch of scattered rows are short: their
  // hits save a read each, and they are kept.
  bool LeavesUnkept(cache::DatasetSlot ds, std::uint64_t bytes_per_run) noexcept override
      EXCLUDES(mu_);
  // Empty (the reader places its rows) when the budget is spent, for a
  // dataset LeaveToReaders named, or with only_on_spare_cpu for fewer than
  // kMinHandOverBytes (counted as reads_admit_small) or when no CPU is spare
  // for the thread (counted as reads_admit_no_spare_cpu).
  std::span<std::byte> Reserve(cache::DatasetSlot ds, std::uint64_t bytes) noexcept override
      EXCLUDES(mu_);
  void Unreserve(std::span<std::byte> buffer) noexcept override EXCLUDES(mu_);
  bool Submit(cache::LoadedRows&& rows) noexcept override EXCLUDES(mu_);

  // Bytes of hand-over buffers the process holds (in use or kept for reuse).
  std::uint64_t KeptBytes() EXCLUDES(mu_);

  // fork(): held across it, so a child never inherits mu_ held.
  void LockForFork() ACQUIRE(mu_) { mu_.Lock(); }
  void UnlockAfterFork() RELEASE(mu_) { mu_.Unlock(); }
  // In the child, after UnlockAfterFork: the parent's queued rows are not
  // this process's to publish (their buffers stay the parent's, unused here).
  void ForgetAfterForkInChild() noexcept EXCLUDES(mu_);

 private:
  // Hand-over buffers, reused: a fresh one would cost the reader a page fault
  // per page at every read (the very cost admission behind it avoids).
  struct Buffer {
    std::unique_ptr<std::byte[]> data;
    std::uint64_t capacity = 0;
    std::uint64_t used = 0;  // bytes of the current hand-over
  };
  // A budget of small rows keeps a thousand buffers: free ones are found by
  // size and buffers in use by address, never by a walk over all of them
  // (which cost more than the copy of a 16 KiB row).
  using FreeBuffers = std::multimap<std::uint64_t, std::unique_ptr<std::byte[]>>;
  // Drops free buffers, smallest first, until `kept_bytes_ + more` fits the
  // budget or none is left.
  void ReleaseFreeBuffersFor(std::uint64_t more) REQUIRES(mu_);
  // Fills the buffer of rows handed over for reading again; false if the
  // file changed or the read failed (the rows are then not published).
  static bool ReadAgain(const CachedDataset& dataset, cache::LoadedRows& rows) noexcept;

  const std::uint64_t budget_bytes_;
  const bool only_on_spare_cpu_;
  const std::uint64_t busy_unkept_run_bytes_;
  cache::io::CpuHeadroom headroom_;  // thread-safe itself
  cache::Mutex mu_;
  // Slots are never reused within a segment, so a slot names one dataset.
  std::unordered_set<cache::DatasetSlot> may_leave_unkept_ GUARDED_BY(mu_);
  std::unordered_map<cache::DatasetSlot, std::shared_ptr<const CachedDataset>> read_again_
      GUARDED_BY(mu_);
  std::unordered_set<cache::DatasetSlot> left_to_readers_ GUARDED_BY(mu_);
  cache::NodeCache* cache_ GUARDED_BY(mu_) = nullptr;
  FreeBuffers free_buffers_ GUARDED_BY(mu_);  // by capacity
  std::unordered_map<const std::byte*, Buffer> buffers_in_use_ GUARDED_BY(mu_);
  std::uint64_t kept_bytes_ GUARDED_BY(mu_) = 0;  // capacity of both
  std::uint64_t in_flight_bytes_ GUARDED_BY(mu_) = 0;
  // One thread, started on first use in each process (pool_pid_).
  std::unique_ptr<cache::io::ThreadPool> pool_ GUARDED_BY(mu_);
  pid_t pool_pid_ GUARDED_BY(mu_) = 0;
};

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_SERVE_ADMISSION_WORKER_H_
