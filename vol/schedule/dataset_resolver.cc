#include "vol/schedule/dataset_resolver.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "cache/base/mutex.h"
#include "vol/objects/dataset_state.h"
#include "vol/objects/file_state.h"
#include "vol/objects/object.h"
#include "vol/objects/scoped_id.h"
#include "vol/runtime/error.h"
#include "vol/runtime/runtime.h"

namespace prescient::vol {
namespace {

namespace io = cache::io;

// Held for a whole resolution and across fork() (LockForFork). Never
// destroyed: a prefetch thread may still resolve while the process exits.
cache::Mutex& ResolveMutex() {
  static cache::Mutex* mutex = new cache::Mutex();
  return *mutex;
}

bool SameFile(const FileIdentity& a, const FileIdentity& b) {
  return a.valid && b.valid && a.device == b.device && a.inode == b.inode && a.size == b.size &&
         a.mtime_ns == b.mtime_ns && a.ctime_ns == b.ctime_ns;
}

// The files resolutions opened, kept open for the next ones until
// ReleaseFiles: a round resolves many datasets of a few files (a group per
// sample: thousands an epoch, for a leader that is a new DataLoader worker
// every epoch, the samples' files in random order). Opened again for each,
// a file's open took a third of a resolution's CPU and the dataset's open,
// in a metadata cache made anew, another 40% (8 files of 1,000 groups:
// 68 and 80 us of 190). Guarded by ResolveMutex (not annotated: a
// function-local static).
//
// A child of fork() inherits them, open in its copy of the library, each on
// a descriptor whose file offset it shares with its parent. The stdio driver
// seeks and reads (no pread), and skips the seek when it believes the offset
// is already right, so anything the child did through them, even closing
// one (glibc's fclose puts the offset back where the stream had read to),
// could make its parent read the wrong bytes. So the child's fork handler
// points each inherited descriptor at an open file description of its own
// (AfterForkInChild: an open and a dup2 each, no HDF5), and the child closes
// them before its first resolution opens anything (OpenKept).
struct KeptFile {
  std::string path;
  FileIdentity identity;
  hid_t id = H5I_INVALID_HID;
  int descriptor = -1;     // the stdio driver's
  std::uint64_t used = 0;  // the resolution that last used it
};
constexpr std::size_t kMaxKeptFiles = 16;

struct KeptFiles {
  std::vector<KeptFile> files;
  std::uint64_t resolutions = 0;
  pid_t owner = 0;  // the process that opened `files`
};

KeptFiles& Kept() {
  static KeptFiles* kept = new KeptFiles();
  return *kept;
}

void Close(KeptFile& file) {
  if (file.id >= 0) (void)H5Fclose(file.id);
  file.id = H5I_INVALID_HID;
}

// The open file of `path` as `identity` says it is now: a kept one, or
// opened (closing the least recently used beyond kMaxKeptFiles); negative
// when HDF5 cannot open it.
hid_t OpenKept(const std::string& path, const FileIdentity& identity) {
  KeptFiles& kept = Kept();
  if (const pid_t self = getpid(); kept.owner != self) {
    for (KeptFile& file : kept.files) Close(file);  // inherited: see KeptFile
    kept.files.clear();
    kept.owner = self;
  }
  const std::uint64_t now = ++kept.resolutions;
  std::vector<KeptFile>& files = kept.files;
  for (auto it = files.begin(); it != files.end(); ++it) {
    if (it->path != path) continue;
    if (SameFile(it->identity, identity)) {
      it->used = now;
      return it->id;
    }
    Close(*it);  // changed since it was opened
    files.erase(it);
    break;
  }
  ScopedId fapl(H5Pcreate(H5P_FILE_ACCESS), &H5Pclose);
  if (fapl.get() < 0 || H5Pset_vol(fapl.get(), H5VL_NATIVE, nullptr) < 0 ||
      H5Pset_fapl_stdio(fapl.get()) < 0 ||
      // Kept open for seconds: a shared lock held that long would make an
      // application's H5Fcreate or read-write open of the file fail. This
      // open never writes, and a file changed meanwhile is reopened above.
      H5Pset_file_locking(fapl.get(), /*use_file_locking=*/false,
                          /*ignore_when_disabled=*/true) < 0) {
    return H5I_INVALID_HID;
  }
  const hid_t opened = H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get());
  if (opened < 0) return opened;
  void* handle = nullptr;
  if (H5Fget_vfd_handle(opened, fapl.get(), &handle) < 0 || handle == nullptr) {
    (void)H5Fclose(opened);  // a file a child could not be kept apart from
    return H5I_INVALID_HID;
  }
  // The stdio driver's handle is the address of its FILE*.
  FILE* const stream = *static_cast<FILE**>(handle);
  const int descriptor = stream != nullptr ? fileno(stream) : -1;
  if (descriptor < 0) {
    (void)H5Fclose(opened);
    return H5I_INVALID_HID;
  }
  if (files.size() >= kMaxKeptFiles) {
    auto oldest =
        std::min_element(files.begin(), files.end(),
                         [](const KeptFile& a, const KeptFile& b) { return a.used < b.used; });
    Close(*oldest);
    files.erase(oldest);
  }
  files.push_back(KeptFile{path, identity, opened, descriptor, now});
  return opened;
}

}  // namespace

void DatasetResolver::ReleaseFiles() {
  cache::MutexLock lock(&ResolveMutex());
  std::vector<KeptFile>& files = Kept().files;
  if (files.empty()) return;
  PreservedErrorStack keep;
  QuietErrorPrinting quiet;
  for (KeptFile& file : files) Close(file);
  files.clear();
}

void DatasetResolver::AfterForkInChild() NO_THREAD_SAFETY_ANALYSIS {
  // ResolveMutex is held (LockForFork). Only async-signal-safe calls.
  for (const KeptFile& file : Kept().files) {
    if (file.descriptor < 0) continue;
    int own = ::open(file.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (own < 0) own = ::open("/dev/null", O_RDONLY | O_CLOEXEC);  // closed unread anyway
    if (own < 0) continue;
    (void)::dup2(own, file.descriptor);
    (void)::close(own);
  }
}

void DatasetResolver::FlushMemo(ResolutionMemo& memo) {
  cache::MutexLock no_fork_meanwhile(&ResolveMutex());
  memo.Flush();
}

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
                                                                    bool only_hdf5_thread,
                                                                    ResolutionMemo* memo) {
  if (!only_hdf5_thread && !Available()) return io::Status::Unsupported("HDF5 is not thread-safe");
  cache::MutexLock no_fork_meanwhile(&ResolveMutex());
  std::shared_ptr<FileState> file = FileState::Make(path.c_str(), /*writable=*/false,
                                                    /*posix_driver=*/true);
  if (!file->identity.valid) return io::Status::IoError("cannot stat " + path);
  // A file the application has open for writing may change under us; one
  // it reads is opened again here, apart from its open (below):
  // a group per sample keeps datasets the application has not opened yet in
  // the very file it reads.
  const std::shared_ptr<FileState> open = OpenFiles::Find(file->identity);
  if (open != nullptr && open->writable) {
    return io::Status::Unsupported(path + " is open for writing in the application");
  }
  // One the application reads as a SWMR reader is checked at its every read
  // (FileState::swmr_read), whoever prepared its datasets.
  const bool swmr_read = open != nullptr && open->swmr_read;
  if (memo != nullptr) {
    if (std::shared_ptr<CachedDataset> known = memo->Find(file, dataset)) {
      if (swmr_read) known->CheckEveryRead();
      return known;
    }
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
    const hid_t h5file = OpenKept(path, file->identity);
    if (h5file < 0) return io::Status::IoError("HDF5 cannot open " + path);
    ScopedId h5dataset(H5Dopen2(h5file, dataset.c_str(), H5P_DEFAULT), &H5Dclose);
    if (h5dataset.get() < 0) return io::Status::IoError("no dataset " + dataset + " in " + path);
    // The public API, not the VOL layer: this thread is not inside a callback.
    const PublicDataset queries(h5dataset.get());
    std::shared_ptr<DatasetState> state = DatasetState::Identify(queries, file.get());
    if (state == nullptr) return io::Status::Unsupported("cannot identify " + dataset);
    std::string why_not;
    std::shared_ptr<CachedDataset> prepared =
        // Virtual datasets too, unless turned off: only those read raw are of use here.
        CachedDataset::Prepare(queries, file, *state,
                               Runtime::Get().options().cache_virtual == VirtualCaching::kOff
                                   ? VirtualCaching::kOff
                                   : VirtualCaching::kRaw,
                               &why_not);
    if (prepared == nullptr) {
      return io::Status::Unsupported(dataset + " in " + path + " is not cached: " + why_not);
    }
    if (!prepared->raw_layout()) {
      return io::Status::Unsupported(dataset + " in " + path + " cannot be read raw (" +
                                     prepared->raw_reason() + ")");
    }
    if (swmr_read) prepared->CheckEveryRead();
    if (memo != nullptr) memo->Remember(dataset, *prepared);
    return prepared;
  } catch (const std::exception& e) {
    return io::Status::Internal(std::string("resolving ") + dataset + " in " + path + ": " +
                                e.what());
  }
}

}  // namespace prescient::vol
