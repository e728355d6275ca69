// Descriptors for raw reads: one per file, shared by all of the file's
// datasets, bounded in number and reopened on demand.
//
// A job over 100,000 one-sample files must not hold 100,000 descriptors (the
// usual limit is 1,024), nor pay an open() per read. At most `capacity`
// descriptors stay open, the least recently used closed first; a file whose
// descriptor was closed is reopened on its next read and checked to still be
// the file HDF5 opened (same device and inode). The application's own reads
// do not come here when HDF5's POSIX driver has the file open: they borrow its
// descriptor (FileState::hdf5_file). Descriptors are opened with the
// kernel's normal readahead, as HDF5's own sec2 driver opens files: a miss of
// a small row then costs what the same native read costs.
//
// Thread-safe (the read callback and the prefetch threads share it) and
// fork-safe: the lock is held across fork(), and a child uses the inherited
// descriptors (pread needs no per-process state).
#ifndef PRESCIENT_VOL_SERVE_FILE_HANDLES_H_
#define PRESCIENT_VOL_SERVE_FILE_HANDLES_H_

#include <sys/stat.h>

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "cache/base/mutex.h"
#include "cache/io/random_access_file.h"
#include "vol/objects/file_state.h"

namespace prescient::vol {

// fstat of an open file: what the file it names is now.
cache::io::Result<FileIdentity> IdentityNow(const cache::io::PosixFile& file);

class FileHandles {
 public:
  // The process's pool: min(256, a quarter of RLIMIT_NOFILE) descriptors.
  static FileHandles& Get();
  explicit FileHandles(std::size_t capacity);

  // A source reading `file` through the pool. Never fails here: a file that
  // cannot be (re)opened fails the read that needed it.
  std::shared_ptr<const cache::io::RandomAccessSource> Source(const FileState& file);

  // fstat of the file's descriptor (reopened if needed): what the file is now.
  cache::io::Result<FileIdentity> Stat(const std::string& path, std::uint64_t device,
                                       std::uint64_t inode);

  std::size_t open_count() const;
  // Descriptors opened so far (first opens and reopens after eviction).
  std::uint64_t opens() const;

 private:
  friend class PooledFile;
  using Key = std::pair<std::uint64_t, std::uint64_t>;  // device, inode
  cache::io::Result<std::shared_ptr<const cache::io::PosixFile>> Acquire(const std::string& path,
                                                                         Key key);
  static void AtForkPrepare() NO_THREAD_SAFETY_ANALYSIS;
  static void AtForkParent() NO_THREAD_SAFETY_ANALYSIS;
  static void AtForkChild() NO_THREAD_SAFETY_ANALYSIS;

  struct Slot {
    std::shared_ptr<const cache::io::PosixFile> file;
    std::list<Key>::iterator lru;
  };
  const std::size_t capacity_;
  mutable cache::Mutex mutex_;
  std::map<Key, Slot> open_ GUARDED_BY(mutex_);
  std::list<Key> lru_ GUARDED_BY(mutex_);  // most recently used first
  std::uint64_t opens_ GUARDED_BY(mutex_) = 0;
};

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_SERVE_FILE_HANDLES_H_
