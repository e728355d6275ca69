#include "vol/schedule/dataset_resolver.h"

#include <exception>

#include "cache/base/mutex.h"
#include "vol/objects/dataset_state.h"
#include "vol/objects/file_state.h"
#include "vol/objects/object.h"
#include "vol/objects/scoped_id.h"
#include "vol/runtime/error.h"

namespace prescient::vol {
namespace {

namespace io = cache::io;

// Held for a whole resolution and across fork() (LockForFork). Never
// destroyed: a prefetch thread may still resolve while the process exits.
cache::Mutex& ResolveMutex() {
  static cache::Mutex* mutex = new cache::Mutex();
  return *mutex;
}

}  // namespace

void DatasetResolver::LockForFork() NO_THREAD_SAFETY_ANALYSIS { ResolveMutex().Lock(); }
void DatasetResolver::UnlockAfterFork() NO_THREAD_SAFETY_ANALYSIS { ResolveMutex().Unlock(); }

bool DatasetResolver::Available() {
  static const bool threadsafe = [] {
    hbool_t yes = false;
    return H5is_library_threadsafe(&yes) >= 0 && yes;
  }();
  return threadsafe;
}

io::Result<std::shared_ptr<CachedDataset>> DatasetResolver::Resolve(const std::string& path,
                                                                    const std::string& dataset,
                                                                    bool only_hdf5_thread) {
  if (!only_hdf5_thread && !Available()) return io::Status::Unsupported("HDF5 is not thread-safe");
  cache::MutexLock no_fork_meanwhile(&ResolveMutex());
  std::shared_ptr<FileState> file = FileState::Make(path.c_str(), /*writable=*/false,
                                                    /*posix_driver=*/true);
  if (!file->identity.valid) return io::Status::IoError("cannot stat " + path);
  // A file the application has open for writing (or SWMR reading) may change
  // under us; one it reads is opened again here, apart from its open (below):
  // a group per sample keeps datasets the application has not opened yet in
  // the very file it reads.
  if (const std::shared_ptr<FileState> open = OpenFiles::Find(file->identity);
      open != nullptr && open->writable) {
    return io::Status::Unsupported(path + " is open for writing in the application");
  }
  PreservedErrorStack keep;  // nothing of this may reach the application's error stack
  QuietErrorPrinting quiet;  // ... nor its stderr: a dataset not in the file is an answer here
  try {
    // The native connector and the stdio driver: HDF5 shares one open file
    // between opens of the same file with the same driver, and the
    // application (sec2, through this connector) may open this file while we
    // hold it. A shared file is closed by whichever open is last, through
    // the first opener's connector stack: ours would be handed the native
    // file object to unwrap (seen as "H5VLunwrap_object(): invalid object"
    // on H5Fclose when a loader opens the files the leader prepares). Files
    // of different drivers are never shared.
    ScopedId fapl(H5Pcreate(H5P_FILE_ACCESS), &H5Pclose);
    if (fapl.get() < 0 || H5Pset_vol(fapl.get(), H5VL_NATIVE, nullptr) < 0 ||
        H5Pset_fapl_stdio(fapl.get()) < 0) {
      return io::Status::Internal("cannot make a native file access property list");
    }
    ScopedId h5file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()), &H5Fclose);
    if (h5file.get() < 0) return io::Status::IoError("HDF5 cannot open " + path);
    ScopedId h5dataset(H5Dopen2(h5file.get(), dataset.c_str(), H5P_DEFAULT), &H5Dclose);
    if (h5dataset.get() < 0) return io::Status::IoError("no dataset " + dataset + " in " + path);
    // The public API, not the VOL layer: this thread is not inside a callback.
    const PublicDataset queries(h5dataset.get());
    std::shared_ptr<DatasetState> state = DatasetState::Identify(queries, file.get());
    if (state == nullptr) return io::Status::Unsupported("cannot identify " + dataset);
    std::shared_ptr<CachedDataset> prepared = CachedDataset::Prepare(queries, file, *state);
    if (!prepared->raw_layout()) {
      return io::Status::Unsupported(dataset + " in " + path + " cannot be read raw (" +
                                     prepared->raw_reason() + ")");
    }
    return prepared;
  } catch (const std::exception& e) {
    return io::Status::Internal(std::string("resolving ") + dataset + " in " + path + ": " +
                                e.what());
  }
}

}  // namespace prescient::vol
