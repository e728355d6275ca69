// Admission behind the reader: a miss's rows go to the caller at storage
// speed, and their copy into the segment (page allocation, copy, the lock
// rounds that place them) is done by another thread of the same process.
//
// The reading thread keeps its claims on the rows (they stay Loading to every
// other reader of the node, who wait for them as for any load) and hands a
// copy of their bytes to the queue, or, for a dataset the queue can read
// itself (ReadsRowsAgain), only the rows: the queue's thread reads them
// again (from the page cache the reader's read just filled) and the reader
// copies nothing. The queue's thread calls NodeCache::PublishLoaded with the
// bytes. Whoever owns a queue must drain it before the NodeCache it publishes
// into goes away.
#ifndef PRESCIENT_CACHE_CORE_ADMISSION_QUEUE_H_
#define PRESCIENT_CACHE_CORE_ADMISSION_QUEUE_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "cache/core/dataset_key.h"

namespace prescient::cache {

// Rows one ReadRows call loaded and still holds claims on (in its process's
// attach slot), with a copy of their bytes, for NodeCache::PublishLoaded.
struct LoadedRows {
  DatasetSlot ds{};
  std::uint16_t slot = 0;              // the claims' attach slot
  std::vector<std::uint64_t> rows;     // ascending
  std::vector<std::uint32_t> entries;  // the claimed entries, one per row
  std::vector<std::uint64_t> keys;     // eviction keys, one per row (empty: LRU)
  std::span<std::byte> bytes;  // row_bytes per row, in rows' order, in a buffer from Reserve
  // The buffer was left unfilled: the queue reads the rows again itself
  // before publishing them (AdmissionQueue::ReadsRowsAgain).
  bool read_again = false;
};

// What PublishLoaded did with the rows.
struct PublishedRows {
  std::uint64_t stored = 0;        // resident now
  std::uint64_t not_admitted = 0;  // declined by a full cache, or their claim was lost
};

class AdmissionQueue {
 public:
  virtual ~AdmissionQueue() = default;
  // A buffer of exactly `bytes` for rows of `ds` to hand over (the queue's
  // memory, reused from hand-over to hand-over), or an empty span when the
  // queue is full, cannot run here or leaves `ds`'s rows to their readers:
  // the reader then publishes the rows itself.
  virtual std::span<std::byte> Reserve(DatasetSlot ds, std::uint64_t bytes) noexcept = 0;
  // Whether rows of `ds` a read loaded, in runs of consecutive rows of
  // `bytes_per_run` bytes on average, are delivered without being kept at all
  // (their claims released, the rows counted as ReadRowsStats::not_kept):
  // asked before Reserve. On a machine whose cores the loop fills, copying a
  // large run into fresh shared memory can cost the loop as much CPU as its
  // later hits save (examples/bench/RESULTS.md, "A fifth public loader").
  virtual bool LeavesUnkept(DatasetSlot ds, std::uint64_t bytes_per_run) noexcept {
    (void)ds;
    (void)bytes_per_run;
    return false;
  }
  // Gives back a buffer from Reserve that will not be submitted.
  virtual void Unreserve(std::span<std::byte> buffer) noexcept = 0;
  // Whether the queue reads these rows of `ds` (`bytes` in all) again
  // itself, from their storage: then Submit gets them with `read_again` set
  // and the buffer unfilled.
  virtual bool ReadsRowsAgain(DatasetSlot ds, std::uint64_t bytes) noexcept = 0;
  // Takes rows whose bytes are in a buffer from Reserve; they are published
  // on another thread. False if that cannot happen after all: the buffer is
  // taken back, and the reader publishes the rows itself.
  virtual bool Submit(LoadedRows&& rows) noexcept = 0;
};

}  // namespace prescient::cache

#endif  // PRESCIENT_CACHE_CORE_ADMISSION_QUEUE_H_
