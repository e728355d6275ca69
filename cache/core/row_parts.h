// The parts of rows a read needs, when it needs not all of each row: labels
// out of an entry of 64 KiB of labels, a few channels or a 3-D patch's ninth
// of each z-plane. A hit then copies only these bytes out of the segment.
#ifndef PRESCIENT_CACHE_CORE_ROW_PARTS_H_
#define PRESCIENT_CACHE_CORE_ROW_PARTS_H_

#include <cstddef>
#include <cstdint>
#include <span>

namespace prescient::cache {

// Bytes [offset, offset + bytes) of a row.
struct RowPart {
  std::uint64_t offset = 0;
  std::uint64_t bytes = 0;
};

// The bytes of each row a read needs: rows[i] needs ranges[first[i]], ...,
// ranges[first[i + 1] - 1] (`first` has one element more than the read has
// rows), ascending within a row. Empty: whole rows.
struct RowParts {
  std::span<const RowPart> ranges;
  std::span<const std::uint32_t> first;
  bool empty() const { return first.empty(); }
  std::span<const RowPart> of(std::size_t i) const {
    return ranges.subspan(first[i], first[i + 1] - first[i]);
  }
};

}  // namespace prescient::cache

#endif  // PRESCIENT_CACHE_CORE_ROW_PARTS_H_
