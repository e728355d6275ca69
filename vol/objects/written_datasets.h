// Datasets created, written or resized through this process.
//
// Their reads are forwarded, never served from the node cache: HDF5 may hold
// written bytes in its own caches (the sieve buffer, the chunk cache, the
// metadata cache) until it closes the file, where a raw read of the file
// would miss them, and every handle of the process to the file shares that
// one open (HDF5 keeps one per file: a read-only handle opened while a
// writable one is open reads through it).
//
// Until the file's writes are behind it: a read-only open that HDF5 made
// anew (its intent is read-only, so no handle of the process had the file
// open for writing any more, and HDF5 flushed and closed it), of a file whose
// status-change time has moved past the one it had when it was opened for
// the writes. The file is then another file to the cache (its identity, and
// every dataset key, include that time), so no row cached before the writes
// can be served for it. Without the second condition a quick rewrite in
// place, within one tick of the kernel's clock, would leave the file's
// identity as it was, and rows cached before it could be served. A notebook
// that writes its data and then trains on it, in forked DataLoader workers
// too, so has the data cached from its first read-only open after the
// writes.
//
// Thread-safe; the lock is a leaf (held across fork()).
#ifndef PRESCIENT_VOL_OBJECTS_WRITTEN_DATASETS_H_
#define PRESCIENT_VOL_OBJECTS_WRITTEN_DATASETS_H_

#include <atomic>
#include <cstdint>
#include <optional>

#include "vol/objects/dataset_state.h"
#include "vol/objects/file_state.h"

namespace prescient::vol {

class WrittenDatasets {
 public:
  // Records a change to the dataset `identity` names (its file's identity is
  // the one the writing handle had when it was opened).
  static void Note(const DatasetIdentity& identity) noexcept;
  // Whether the dataset was changed through this process and its file's
  // writes are not known to be behind it.
  static bool Contains(const DatasetIdentity& identity) noexcept;

  // A read-only open of `file` (its identity at this open): forgets the
  // changes to its datasets when `opened_anew()` (asked only then: HDF5's
  // intent for the file is read-only) and its status-change time is past
  // the one of every handle its changes were made through and of every
  // read-only open since (rows may have been cached under that open's
  // identity, from bytes HDF5 had not flushed). Costs one atomic load while
  // nothing was ever changed through this process.
  template <typename OpenedAnew>
  static void FileOpenedReadOnly(const FileIdentity& file, OpenedAnew&& opened_anew) noexcept {
    if (files_.load(std::memory_order_acquire) == 0 || !file.valid) return;
    const std::optional<bool> past = ChangedBefore(file);
    if (!past) return;  // nothing changed in this file
    Settle(file, *past && opened_anew());
  }

 private:
  // Nullopt when no change to `file` is recorded; else whether this open's
  // status-change time is past every one recorded for it.
  static std::optional<bool> ChangedBefore(const FileIdentity& file) noexcept;
  // Forgets the changes to `file` when `behind` (and its time is still past
  // every one recorded); else records its time.
  static void Settle(const FileIdentity& file, bool behind) noexcept;
  static std::atomic<std::uint32_t> files_;  // files with changes recorded
};

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_OBJECTS_WRITTEN_DATASETS_H_
