// Byte ranges of several sources read as one address space.
//
// A virtual dataset's rows live in other files (its sources), each mapping a
// run of rows to a contiguous dataset there. Spliced in the order of the
// rows, those runs make one source in which row r is at r * row_bytes, so
// the dataset reads as a contiguous layout at offset 0 and everything built
// for contiguous rows (coalescing, read-around, the loader) applies: a read
// that crosses from one run into the next is split at the seam into a read
// of each file. Sources chunked alike are spliced whole instead, one file
// after another, and the dataset read as a chunked layout whose chunk
// addresses are moved by their file's place in the splice.
#ifndef PRESCIENT_CACHE_IO_SPLICED_SOURCE_H_
#define PRESCIENT_CACHE_IO_SPLICED_SOURCE_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cache/io/random_access_file.h"
#include "cache/io/status.h"

namespace prescient::cache::io {

class SplicedSource final : public RandomAccessSource {
 public:
  // Bytes [begin, begin + bytes) of the spliced space are `file`'s bytes
  // from `file_offset` on.
  struct Run {
    std::uint64_t begin = 0;
    std::uint64_t bytes = 0;
    std::shared_ptr<const RandomAccessSource> file;
    std::uint64_t file_offset = 0;
  };

  // REQUIRES (else InvalidArgument): runs that tile [0, end) without gaps or
  // overlaps once sorted by `begin`, each of at least one byte, with a file.
  static Result<std::unique_ptr<SplicedSource>> Make(std::vector<Run> runs, std::string name);

  Status ReadExact(std::uint64_t offset, std::span<std::byte> out) const override;
  // Split at the seams, each part handed whole to its file's ReadScattered
  // (one preadv where that is a PosixFile).
  Status ReadScattered(std::uint64_t offset, std::span<const ScatterPiece> pieces) const override;
  Result<std::uint64_t> Size() const override { return end_; }
  const std::string& name() const override { return name_; }
  std::size_t runs() const { return runs_.size(); }

 private:
  SplicedSource(std::vector<Run> runs, std::string name, std::uint64_t end)
      : runs_(std::move(runs)), name_(std::move(name)), end_(end) {}
  // The run holding `offset` (< end_).
  const Run& RunAt(std::uint64_t offset) const;
  Status OutOfRange(std::uint64_t offset, std::uint64_t bytes) const;

  std::vector<Run> runs_;  // by begin
  std::string name_;
  std::uint64_t end_;
};

}  // namespace prescient::cache::io

#endif  // PRESCIENT_CACHE_IO_SPLICED_SOURCE_H_
