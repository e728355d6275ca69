// What Prescient knows about an open file: its name, whether it was opened for
// writing, and its identity on disk at open time.
//
// The identity (device, inode, size, modification and status-change times) is part of every
// dataset identity, so a file that is rewritten, truncated or replaced is a
// different file to the cache even if its name is the same.
#ifndef PRESCIENT_VOL_OBJECTS_FILE_STATE_H_
#define PRESCIENT_VOL_OBJECTS_FILE_STATE_H_

#include <sys/stat.h>

#include <cstdint>
#include <memory>
#include <string>

#include "cache/io/random_access_file.h"

namespace prescient::vol {

struct FileIdentity {
  bool valid = false;  // false: not a regular file we could stat (e.g. the core driver)
  std::uint64_t device = 0;
  std::uint64_t inode = 0;
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0;
  // Status change time: unlike mtime it cannot be set back (cp -p, rsync -t,
  // tar x restore mtimes), so a rewritten file always gets a new identity.
  std::int64_t ctime_ns = 0;
};

// The same file in the same version: device, inode, size, modification and
// status-change times all equal (validity is the caller's question).
inline bool SameVersion(const FileIdentity& a, const FileIdentity& b) {
  return a.device == b.device && a.inode == b.inode && a.size == b.size &&
         a.mtime_ns == b.mtime_ns && a.ctime_ns == b.ctime_ns;
}

// stat(2) of `path`; invalid on any failure.
FileIdentity IdentifyFile(const std::string& path);
// The identity a stat(2)/fstat(2) result describes (invalid unless a regular file).
FileIdentity IdentityOf(const struct stat& st);

struct FileState {
  // `hdf5_fd`: HDF5's own descriptor of the file (the POSIX driver's), or -1.
  // With one, the identity is that of the file HDF5 has open (fstat), not of
  // whatever the name points to by now, and the descriptor is borrowed.
  static std::shared_ptr<FileState> Make(const char* name, bool writable, bool posix_driver = false,
                                         int hdf5_fd = -1);

  std::string name;
  // Opened for writing: its data may change, so nothing of it is ever served
  // from the cache.
  bool writable = false;
  // Opened for SWMR reading (H5F_ACC_SWMR_READ; h5py's swmr=True, which
  // robomimic and the loaders built on it pass by default): a SWMR writer may
  // change the file while it is open, so its datasets are served from the
  // cache only after a look at the file's identity at every read
  // (CachedDataset::CheckEveryRead), not once a second as for other files.
  bool swmr_read = false;
  // Opened with HDF5's POSIX (sec2) driver: file addresses are offsets a plain
  // pread of `name` can use. Other drivers (core, family, split, MPI-IO, ros3)
  // are read through HDF5 only.
  bool posix_driver = false;
  FileIdentity identity;
  // steady_clock time (ns) at which `identity` was taken: the file was as
  // `identity` says at least until then.
  std::int64_t identified_ns = 0;
  // Wall-clock time (CLOCK_REALTIME, ns, comparable with file timestamps)
  // since which this process has had the file open without a break: this
  // open's, or an earlier one still open when this one was made (OpenFiles).
  // HDF5 can have opened what the file refers to (a virtual dataset's
  // sources) only after it.
  std::int64_t open_since_realtime_ns = 0;
  // HDF5's own descriptor of the file, borrowed (never closed here) for the
  // raw reads and change checks the application's thread makes inside an HDF5
  // call on one of the file's objects, which holds the file open: a miss then
  // needs no second descriptor (open, fstat, close) per file. Null for other
  // drivers, and from the application's close of the file on, after which
  // HDF5 may close the descriptor. Set and cleared inside HDF5 calls only,
  // which the library serializes; other threads read through FileHandles.
  std::shared_ptr<const cache::io::PosixFile> hdf5_file;
};

// Files the application opened through the connector, by device and inode,
// for objects that turn out to live in another file than their parent's.
class OpenFiles {
 public:
  // Called for every file opened or created through the connector. Moves
  // `file->open_since_realtime_ns` back to that of an open of the same file
  // still live.
  static void Remember(const std::shared_ptr<FileState>& file);
  // The live FileState of that file, if the application has it open.
  static std::shared_ptr<FileState> Find(const FileIdentity& identity);
};

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_OBJECTS_FILE_STATE_H_
