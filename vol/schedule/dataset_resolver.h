// Prepares datasets the application has not opened, so the prefetch leader
// can read their rows ahead. A job over many files opens each file just
// before reading it (one sample per file: the open *is* the read), too late
// for a prefetcher that only knows the datasets opened so far.
//
// The file is opened read-only with HDF5's native connector directly (not
// through this connector), the dataset is identified and prepared exactly as
// the open callback would (same identity, so the application's later open
// finds it registered), and the dataset is closed again. The file stays open
// (up to 16 of them) for the next resolutions of the same file until
// ReleaseFiles: the prefetcher releases them once its rounds have resolved
// nothing for a while, the node agent once it has prepared its datasets, and
// HDF5 closes those left when it terminates. It
// is opened without HDF5's file lock, so that holding it never makes an
// application's open for writing fail; a file changed since (another
// identity) is opened anew; a forked child closes what it inherited on
// descriptions of its own (AfterForkInChild). This runs on the
// prefetch thread, so it is done only where HDF5 is thread-safe
// (H5is_library_threadsafe): every HDF5 call then takes HDF5's own lock. The
// prefetch thread holds no cache claim while it resolves, so a read callback
// that waits for a prefetched row (holding that lock) never waits for it.
// With a library that is not thread-safe Available() is false, and only the
// datasets the application opened are prefetched.
//
// A file the application has open for reading is opened a second time here,
// apart from the application's open (another driver: see Resolve): a group
// per sample (PDEBench's seeds) keeps the datasets the application has not
// opened yet in the file it reads. One it has open for writing is not.
#ifndef PRESCIENT_VOL_SCHEDULE_DATASET_RESOLVER_H_
#define PRESCIENT_VOL_SCHEDULE_DATASET_RESOLVER_H_

#include <memory>
#include <string>

#include "cache/io/status.h"
#include "vol/serve/cached_dataset.h"
#include "vol/serve/resolution_memo.h"

namespace prescient::vol {

class DatasetResolver {
 public:
  // True when HDF5 is thread-safe: background resolution is allowed.
  static bool Available();

  // The prepared (not registered) dataset `dataset` of `path`, or why not.
  // `only_hdf5_thread`: the caller is the only thread of the process that
  // uses HDF5 (the node agent's main thread), so a library that is not
  // thread-safe is fine.
  // With a `memo`, a dataset a leader of the node resolved in the file as it
  // is now is prepared from the memo without HDF5, and one resolved here is
  // remembered in it.
  static cache::io::Result<std::shared_ptr<CachedDataset>> Resolve(const std::string& path,
                                                                   const std::string& dataset,
                                                                   bool only_hdf5_thread = false,
                                                                   ResolutionMemo* memo = nullptr);
  // Writes what `memo` remembered (under the fork lock, like its reads).
  static void FlushMemo(ResolutionMemo& memo);

  // Closes the files the resolutions keep open.
  static void ReleaseFiles();

  // fork() must not happen while a prefetch thread resolves: the child would
  // inherit HDF5's global lock (and the open-file registry's) held by a
  // thread it does not have, and its first HDF5 call (a DataLoader worker's
  // first read) would wait forever. The connector's fork-prepare handler
  // takes this before any other lock of the connector (a resolution takes
  // none of them), so fork() waits for a resolution under way (milliseconds)
  // and none starts until the child exists.
  static void LockForFork();
  static void UnlockAfterFork();
  // In the child, between the two: the files kept open get open file
  // descriptions of their own, so that nothing the child does moves its
  // parent's file offsets (see KeptFile in the .cc).
  static void AfterForkInChild();
};

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_SCHEDULE_DATASET_RESOLVER_H_
