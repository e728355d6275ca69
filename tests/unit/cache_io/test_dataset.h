// Synthetic datasets for the cache/io tests: an n-d array with known bytes,
// written into an in-memory "file" the way HDF5 stores it (contiguous, or
// chunked with edge chunks stored full size, optionally shuffled and
// deflated with zlib), plus the matching raw layout.
#ifndef PRESCIENT_TESTS_UNIT_CACHE_IO_TEST_DATASET_H_
#define PRESCIENT_TESTS_UNIT_CACHE_IO_TEST_DATASET_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cache/io/random_access_file.h"
#include "cache/io/raw_layout.h"

namespace prescient::cache::io::testing {

// The bytes of a string of hex digits ("00ff..."), for known answers.
std::vector<std::byte> Hex(const std::string& hex);

// A RandomAccessSource over bytes in memory.
class MemorySource final : public RandomAccessSource {
 public:
  explicit MemorySource(std::vector<std::byte> bytes, std::string name = "memory")
      : bytes_(std::move(bytes)), name_(std::move(name)) {}
  Status ReadExact(std::uint64_t offset, std::span<std::byte> out) const override;
  Result<std::uint64_t> Size() const override { return bytes_.size(); }
  const std::string& name() const override { return name_; }
  std::vector<std::byte>& bytes() { return bytes_; }

 private:
  std::vector<std::byte> bytes_;
  std::string name_;
};

struct ChunkedSpec {
  std::vector<std::uint64_t> shape{};
  std::vector<std::uint64_t> chunk_shape{};
  std::uint64_t element_size = 4;
  bool shuffle = false;
  bool deflate = false;
  std::uint64_t gap_between_chunks = 0;      // padding bytes between stored chunks
  bool reverse_file_order = false;           // store the last chunk first
  std::vector<std::uint64_t> unallocated{};  // linear indices never written
  std::uint32_t filter_mask = 0;             // applied to every chunk (skipped stages)
};

struct TestDataset {
  std::vector<std::byte> array;  // the logical C-order array
  std::vector<std::byte> file;   // its storage
  std::uint64_t row_bytes = 0;
  std::vector<std::byte> fill;  // fill element (empty: zero)

  // The expected bytes of a row (unallocated chunks read as the fill value).
  std::vector<std::byte> expected_row(std::uint64_t row) const {
    return {array.begin() + static_cast<std::ptrdiff_t>(row * row_bytes),
            array.begin() + static_cast<std::ptrdiff_t>((row + 1) * row_bytes)};
  }
};

// Element bytes are a hash of their index, so misplaced bytes show.
std::vector<std::byte> MakeArray(std::uint64_t elements, std::uint64_t element_size);

TestDataset MakeContiguous(std::uint64_t rows, std::uint64_t row_bytes, std::uint64_t data_offset,
                           ContiguousLayout& layout);

// Unallocated chunks' elements are set to `fill` (zero when empty) in `array`.
TestDataset MakeChunked(const ChunkedSpec& spec, ChunkedLayout& layout,
                        std::vector<std::byte> fill = {});

// zlib compress2 (HDF5's deflate format).
std::vector<std::byte> Deflate(const std::vector<std::byte>& in, int level = 6);

}  // namespace prescient::cache::io::testing

#endif  // PRESCIENT_TESTS_UNIT_CACHE_IO_TEST_DATASET_H_
