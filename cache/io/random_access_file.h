// Positional reads from a file, the only I/O primitive the loader needs.
//
// RandomAccessSource is an interface so tests can inject faults (short files,
// failing reads) the way leveldb's EnvWrapper does. PosixFile implements it
// with pread(2): no file position is shared, so one object serves any number
// of threads at once, and an inherited descriptor keeps working in a forked
// child.
#ifndef PRESCIENT_CACHE_IO_RANDOM_ACCESS_FILE_H_
#define PRESCIENT_CACHE_IO_RANDOM_ACCESS_FILE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "cache/io/status.h"

namespace prescient::cache::io {

// One destination of a scattered read: `size` bytes go to `data`, or are
// skipped when `data` is null (a gap inside a coalesced read).
struct ScatterPiece {
  std::byte* data = nullptr;
  std::size_t size = 0;
};

class RandomAccessSource {
 public:
  virtual ~RandomAccessSource() = default;
  // Fills all of `out` with the bytes at [offset, offset + out.size()), or
  // returns an error naming the file, offset and cause (including a file that
  // ends early). Safe to call concurrently.
  virtual Status ReadExact(std::uint64_t offset, std::span<std::byte> out) const = 0;
  // Reads the consecutive bytes starting at `offset` into the pieces in
  // order, as one request where the source can (preadv). Skipped pieces need
  // not be read (only the wanted bytes must exist). The default issues one
  // ReadExact per non-skipped piece.
  virtual Status ReadScattered(std::uint64_t offset, std::span<const ScatterPiece> pieces) const;
  virtual Result<std::uint64_t> Size() const = 0;
  virtual const std::string& name() const = 0;
};

// How the loader will read a file it opens.
enum class AccessPattern {
  kNormal,  // kernel default readahead
  // POSIX_FADV_RANDOM: no readahead. For uncoalesced single-row reads, where
  // readahead (8 MiB on some virtual disks) fetches bytes nobody asked for.
  kRandom,
};

class PosixFile final : public RandomAccessSource {
 public:
  // Opens `path` read-only (O_CLOEXEC); the descriptor is closed on destruction.
  // The access pattern applies to this descriptor only (readahead state is per open file).
  static Result<std::unique_ptr<PosixFile>> Open(const std::string& path,
                                                 AccessPattern pattern = AccessPattern::kNormal);
  // Wraps a descriptor owned by someone else (e.g. HDF5's sec2 driver); never closed here.
  static std::unique_ptr<PosixFile> Borrow(int fd, std::string name);

  ~PosixFile() override;
  PosixFile(const PosixFile&) = delete;
  PosixFile& operator=(const PosixFile&) = delete;

  Status ReadExact(std::uint64_t offset, std::span<std::byte> out) const override;
  // preadv straight into the pieces; skipped bytes between wanted ones land
  // in a per-thread discard buffer, so rows need no copy out of a staging
  // buffer. Skipped bytes before the first wanted piece and after the last
  // are not read at all: posix_fadvise(POSIX_FADV_WILLNEED) over the whole
  // range brings them into the page cache in the same device request (what a
  // read covering a window of HDF5's sieve size is for: the neighbours of a
  // row are read once, while cold) without copying them, and a file that no
  // longer holds them is no error.
  Status ReadScattered(std::uint64_t offset, std::span<const ScatterPiece> pieces) const override;
  Result<std::uint64_t> Size() const override;
  const std::string& name() const override { return name_; }
  int fd() const { return fd_; }

 private:
  PosixFile(int fd, std::string name, bool owned)
      : fd_(fd), name_(std::move(name)), owned_(owned) {}

  int fd_;
  std::string name_;
  bool owned_;
};

// Makes a file cold for benchmarks: flushes its dirty pages (fdatasync), then
// asks the kernel to drop its cached pages (posix_fadvise POSIX_FADV_DONTNEED).
// Needs no privilege. Pages mapped or locked by other processes may stay.
Status DropFromPageCache(const std::string& path);
Status DropFromPageCache(int fd);

}  // namespace prescient::cache::io

#endif  // PRESCIENT_CACHE_IO_RANDOM_ACCESS_FILE_H_
