// A source whose bytes are one pattern repeated: byte o is pattern[o % size].
//
// A virtual dataset's rows that no mapping gives read as its fill value. Such
// a run spliced among the source files' runs (spliced_source.h) keeps the
// dataset one address space whose every byte is what HDF5 reads there: a
// pattern of one element, the fill value, repeated from offset 0 of the run
// (runs begin at row boundaries, so at element boundaries).
#ifndef PRESCIENT_CACHE_IO_PATTERN_SOURCE_H_
#define PRESCIENT_CACHE_IO_PATTERN_SOURCE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cache/io/random_access_file.h"
#include "cache/io/status.h"

namespace prescient::cache::io {

class PatternSource final : public RandomAccessSource {
 public:
  // REQUIRES (else InvalidArgument): a pattern of at least one byte.
  static Result<std::unique_ptr<PatternSource>> Make(std::vector<std::byte> pattern,
                                                     std::uint64_t size, std::string name);

  Status ReadExact(std::uint64_t offset, std::span<std::byte> out) const override;
  Result<std::uint64_t> Size() const override { return size_; }
  const std::string& name() const override { return name_; }

 private:
  PatternSource(std::vector<std::byte> pattern, std::uint64_t size, std::string name)
      : pattern_(std::move(pattern)), size_(size), name_(std::move(name)) {}

  std::vector<std::byte> pattern_;
  std::uint64_t size_;
  std::string name_;
};

}  // namespace prescient::cache::io

#endif  // PRESCIENT_CACHE_IO_PATTERN_SOURCE_H_
