// What the node's processes found out about the datasets they prepared, kept
// beside the node's segment so that a prefetch leader prepares them without
// opening them.
//
// A DataLoader forks its workers anew every epoch, and one of them leads the
// node's prefetching. A new leader knows none of the datasets the last one
// resolved: for a group per sample (8,000 groups) it opened every group's
// dataset again each epoch (H5Dopen2, about 70 us through the stdio driver,
// plus identifying and preparing it: 0.8 s of a worker's CPU an epoch), before
// it could even ask the cache whether the group's rows were there. Records
// come from the leaders' resolutions and, while a followed sampler is being
// learned, from the datasets the job's own opens prepared (CacheClient): the
// first leader after the learning epoch opens none of the groups the workers
// opened in it.
//
// The memo is `<cache path>.resolved` (NodeCache::memo_path()), mode 0600 in
// the user's own directory, removed with the segment's registry. Each record
// is what CachedDataset::Prepare found (the dataset's key, shape, raw layout)
// under the file's path, the dataset's name (rooted at the file: "x" and "/x"
// are one) and the file's identity (device, inode, size, mtime, ctime). A
// record is used only while the file still has that identity: a file
// rewritten since gets a new one (its ctime cannot be set back) and is
// resolved through HDF5 again, exactly as the cache's own keys would never
// match its old rows. Records are checksummed; a process that meets a
// damaged or foreign one stops using the memo (it is a hint: datasets are then
// resolved as before, never read wrong). The memo stops growing at kMaxBytes;
// datasets past that are resolved each time.
//
// Thread-safe; calls no HDF5 function. Its callers hold a lock the
// connector's fork handlers take (the resolver's on the prefetch thread, the
// CacheClient's in an open callback), so a fork never finds it in use.
#ifndef PRESCIENT_VOL_SERVE_RESOLUTION_MEMO_H_
#define PRESCIENT_VOL_SERVE_RESOLUTION_MEMO_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "cache/base/mutex.h"
#include "cache/base/thread_annotations.h"
#include "vol/objects/file_state.h"
#include "vol/serve/cached_dataset.h"

namespace prescient::vol {

class ResolutionMemo {
 public:
  static constexpr std::uint64_t kMaxBytes = 32u << 20;  // ~100,000 contiguous datasets

  // `path`: the node's (NodeCache::memo_path()).
  explicit ResolutionMemo(std::string path) : path_(std::move(path)) {}
  ResolutionMemo(const ResolutionMemo&) = delete;
  ResolutionMemo& operator=(const ResolutionMemo&) = delete;

  // `name` of `file` as a leader of the node prepared it, if one did while
  // the file had its present identity; else null. Reads what other leaders
  // appended since this process last looked.
  std::shared_ptr<CachedDataset> Find(const std::shared_ptr<FileState>& file,
                                      const std::string& name) EXCLUDES(mutex_);
  // Remembers `dataset`, prepared through HDF5 with a raw layout when asked
  // for `name`, for later leaders; written at the next Flush.
  void Remember(const std::string& name, const CachedDataset& dataset) EXCLUDES(mutex_);
  // Appends what was remembered since the last flush, in one write: all of
  // it, or (`batched`) once it is kBatchBytes or its oldest record is
  // kBatchAge old. A process may end at any time without flushing (a
  // DataLoader worker's os._exit): what it loses is bounded by the batch.
  void Flush(bool batched = false) EXCLUDES(mutex_);
  static constexpr std::size_t kBatchBytes = 16 * 1024;
  static constexpr std::chrono::milliseconds kBatchAge{500};

  // For the statistics and tests: records found in the file, datasets
  // prepared from them, and whether the memo was given up. Lock-free: it is
  // asked outside the resolver's fork lock, and a fork must never find the
  // memo's own lock held.
  struct Tally {
    std::uint64_t records = 0;
    std::uint64_t found = 0;
    bool given_up = false;
  };
  Tally tally() const {
    return {.records = records_.load(), .found = found_.load(), .given_up = given_up_.load()};
  }

 private:
  struct Record {
    FileIdentity file;
    CachedDataset::Facts facts;
  };
  // Reads the records appended after `read_bytes_`, if the file grew.
  void CatchUpLocked() REQUIRES(mutex_);
  // Parses one record's payload into the index; false if it is malformed.
  bool IndexLocked(std::string_view payload) REQUIRES(mutex_);
  void GiveUpLocked(const std::string& why) REQUIRES(mutex_);

  const std::string path_;
  mutable cache::Mutex mutex_;
  // By file path + '\0' + dataset name; a later record replaces an earlier.
  std::unordered_map<std::string, Record> index_ GUARDED_BY(mutex_);
  // The canonical path of each file path Remember was given ("" if none).
  std::unordered_map<std::string, std::string> canonical_ GUARDED_BY(mutex_);
  std::uint64_t read_bytes_ GUARDED_BY(mutex_) = 0;
  std::string pending_ GUARDED_BY(mutex_);  // records not yet written
  std::chrono::steady_clock::time_point pending_since_ GUARDED_BY(mutex_);
  std::atomic<bool> given_up_{false};  // written under mutex_
  std::atomic<std::uint64_t> records_{0};
  std::atomic<std::uint64_t> found_{0};
};

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_SERVE_RESOLUTION_MEMO_H_
